import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { median, ratios, type Medians } from "./report.ts";

describe("peer report", () => {
  it("median of odd and even counts, ignoring NaN", () => {
    assert.equal(median([3, 1, 2]), 2);
    assert.equal(median([4, 1, 2, 3]), 2.5);
    assert.equal(median([Number.NaN, 5]), 5);
    assert.ok(Number.isNaN(median([])));
  });

  it("ratios are crdfn ÷ peer, null where the peer's figure is 0 or missing", () => {
    const m: Medians = {
      crdfn: { "closed loop changes/s": 100, "off-cluster CPU ms/change": 4 },
      "controller-runtime(8)": { "closed loop changes/s": 200, "off-cluster CPU ms/change": 0 },
    };
    const r = ratios(m);
    assert.deepEqual(Object.keys(r), ["controller-runtime(8)"]);
    assert.equal(r["controller-runtime(8)"]?.["closed loop changes/s"], 0.5);
    assert.equal(r["controller-runtime(8)"]?.["off-cluster CPU ms/change"], null);
    assert.equal(r["controller-runtime(8)"]?.["rated p50 (ms)"], null);
  });
});
