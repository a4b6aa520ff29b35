import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { atRate, forEachBounded, inFlight } from "./drive.ts";

const now = () => performance.now();

describe("load shapes", () => {
  it("atRate starts rate × duration actions, spread over the duration, without waiting for them", async () => {
    const at: number[] = [];
    const t0 = now();
    let running = 0;
    let overlap = 0;
    const n = await atRate(
      100,
      200,
      async () => {
        at.push(now() - t0);
        overlap = Math.max(overlap, ++running);
        await new Promise((r) => setTimeout(r, 50));
        running--;
      },
      now,
    );
    assert.ok(n >= 19 && n <= 21, `about rate × duration actions (${n})`);
    assert.ok((at.at(-1) ?? 0) >= 180, `last started at ${at.at(-1)}`);
    // Not waiting for them: a later one starts while an earlier one runs (a bound on time would need a quiet machine).
    assert.ok(overlap > 1, `at most ${overlap} at once`);
  });

  it("inFlight never has more than `workers` actions at once", async () => {
    // A clock each action moves 5 ms: the count does not depend on the machine's load.
    let t = 0;
    let current = 0;
    let peak = 0;
    let total = 0;
    await inFlight(
      4,
      100,
      async () => {
        peak = Math.max(peak, ++current);
        await new Promise((r) => setImmediate(r));
        t += 5;
        current--;
        total++;
      },
      () => t,
    );
    assert.equal(peak, 4);
    assert.ok(total >= 20 && total <= 24, `${total} actions: the duration's worth, each worker finishing the one in hand`);
  });

  it("forEachBounded visits every index once with bounded concurrency", async () => {
    const seen: number[] = [];
    let current = 0;
    let peak = 0;
    await forEachBounded(25, 3, async (i) => {
      peak = Math.max(peak, ++current);
      await new Promise((r) => setTimeout(r, 1));
      seen.push(i);
      current--;
    });
    assert.deepEqual(
      [...seen].sort((a, b) => a - b),
      Array.from({ length: 25 }, (_, i) => i),
    );
    assert.equal(peak, 3);
  });
});
