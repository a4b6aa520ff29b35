/**
 * Retries an assertion until it passes or the time is up, then rethrows its last failure.
 * The world converges asynchronously (controllers, queues); tests assert on where it lands.
 */
export async function eventually<T>(check: () => T | Promise<T>, { timeoutMs = 20_000, intervalMs = 100 } = {}): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await check();
    } catch (e) {
      if (Date.now() > deadline) throw e;
      await new Promise((r) => setTimeout(r, intervalMs));
    }
  }
}
