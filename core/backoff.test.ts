import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { backoffMs } from "./backoff.ts";

describe("backoffMs", () => {
  it("doubles from the initial wait up to the cap", () => {
    const policy = { initialMs: 250, maxMs: 5000 };
    assert.deepEqual(
      [1, 2, 3, 4, 5, 6, 50].map((n) => backoffMs(n, policy)),
      [250, 500, 1000, 2000, 4000, 5000, 5000],
    );
  });

  it("takes at most the jitter fraction off at random", () => {
    const policy = { initialMs: 1000, maxMs: 10_000, jitter: 0.5 };
    assert.equal(
      backoffMs(1, policy, () => 0),
      1000,
    );
    assert.equal(
      backoffMs(1, policy, () => 0.5),
      750,
    );
    assert.ok(backoffMs(1, policy, () => 0.999) > 500);
  });
});
