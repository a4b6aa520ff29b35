import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { atRate, forEachBounded, inFlight } from "./drive.ts";

const now = () => performance.now();

describe("load shapes", () => {
  it("atRate starts rate × duration actions, spread over the duration, without waiting for them", async () => {
    const at: number[] = [];
    const t0 = now();
    const n = await atRate(
      100,
      200,
      async () => {
        at.push(now() - t0);
        await new Promise((r) => setTimeout(r, 50));
      },
      now,
    );
    assert.ok(n >= 19 && n <= 21, `about rate × duration actions (${n})`);
    assert.ok((at.at(-1) ?? 0) >= 180, `last started at ${at.at(-1)}`);
    assert.ok(now() - t0 < 400);
  });

  it("inFlight never has more than `workers` actions at once", async () => {
    let current = 0;
    let peak = 0;
    let total = 0;
    await inFlight(
      4,
      100,
      async () => {
        peak = Math.max(peak, ++current);
        await new Promise((r) => setTimeout(r, 5));
        current--;
        total++;
      },
      now,
    );
    assert.equal(peak, 4);
    assert.ok(total > 8);
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
