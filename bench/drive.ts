// Load shapes: a fixed rate (open loop), and a fixed number of changes in flight (closed loop);
// and the one way every benchmark times a change end to end.
import type { Greetings } from "./greetings.ts";
import type { StatusWatch } from "./status-watch.ts";

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/**
 * Starts `act(k)` for k = 0, 1, … at `ratePerSecond` for `durationMs`, without waiting for
 * earlier ones (open loop: a slow pipeline does not slow the offered load). Resolves when all
 * started actions have settled; returns how many were started.
 */
export async function atRate(ratePerSecond: number, durationMs: number, act: (k: number) => Promise<void>, now: () => number): Promise<number> {
  const started: Promise<void>[] = [];
  const t0 = now();
  const interval = 1000 / ratePerSecond;
  for (let k = 0; ; k++) {
    const due = t0 + k * interval;
    if (due - t0 >= durationMs) break;
    const wait = due - now();
    if (wait > 0) await sleep(wait);
    started.push(act(k));
  }
  await Promise.all(started);
  return started.length;
}

/**
 * Runs `workers` loops of `act(worker, round)` until `durationMs` has passed (each finishes
 * the action in hand). Resolves when every loop has ended.
 */
export async function inFlight(workers: number, durationMs: number, act: (worker: number, round: number) => Promise<void>, now: () => number): Promise<void> {
  const end = now() + durationMs;
  await Promise.all(
    Array.from({ length: workers }, async (_, w) => {
      for (let round = 0; now() < end; round++) await act(w, round);
    }),
  );
}

/** Runs `act(i)` for i in 0..count-1 with at most `concurrency` at a time. */
export async function forEachBounded(count: number, concurrency: number, act: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(concurrency, count) }, async () => {
      while (next < count) await act(next++);
    }),
  );
}

/**
 * The raw status-PATCH ceiling of the API server: `workers` patches in flight for `durationMs`,
 * each a status write of one object; what any reconcile pipeline on that server can approach.
 */
export async function measureRawCeiling(
  workers: number,
  durationMs: number,
  patch: (worker: number, round: number) => Promise<unknown>,
  now: () => number,
): Promise<{ latencies: number[]; errors: number; seconds: number }> {
  const latencies: number[] = [];
  let errors = 0;
  const t = now();
  await inFlight(
    workers,
    durationMs,
    async (w, round) => {
      const start = now();
      try {
        await patch(w, round);
        latencies.push(now() - start);
      } catch {
        errors++;
      }
    },
    now,
  );
  return { latencies, errors, seconds: (now() - t) / 1000 };
}

export interface ChangeCounts {
  errors: number;
  unobserved: number;
}

/**
 * `change(i, message, latencies, counts)`: one end-to-end sample — the spec write of object
 * `names[i]`, then the status watch seeing its new generation reconciled. A failed write or a
 * status not seen within `timeoutMs` is counted, not timed.
 */
export function changeTimer(o: { greetings: Greetings; watch: StatusWatch; names: readonly string[]; now: () => number; timeoutMs: number }) {
  return async (i: number, message: string, latencies: number[], counts: ChangeCounts): Promise<void> => {
    const name = o.names[i] ?? "";
    const start = o.now();
    let generation: number;
    try {
      generation = await o.greetings.setMessage(name, message);
    } catch {
      counts.errors++;
      return;
    }
    const at = await o.watch.reconciled(name, generation, o.timeoutMs);
    if (at === undefined) counts.unobserved++;
    else latencies.push(at - start);
  };
}
