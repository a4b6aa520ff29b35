// Promise helpers for load and deadlines in tests: bounded parallelism and a timeout.

/** Runs `fn` over `items` with at most `concurrency` at a time. */
export async function parallel<T, R>(items: readonly T[], concurrency: number, fn: (item: T, index: number) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array<R>(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(concurrency, items.length) }, async () => {
      while (next < items.length) {
        const i = next++;
        out[i] = await fn(items[i] as T, i);
      }
    }),
  );
  return out;
}

export function withTimeout<T>(p: Promise<T>, ms: number, what: string | (() => string)): Promise<T> {
  let t: NodeJS.Timeout | undefined;
  const describe = typeof what === "string" ? () => what : what;
  return Promise.race([p, new Promise<never>((_, reject) => (t = setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${describe()}`)), ms)))]).finally(
    () => clearTimeout(t),
  );
}
