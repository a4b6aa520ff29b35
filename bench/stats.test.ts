import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { percentile, summarizeCounts, summarizeLatency } from "./stats.ts";

describe("bench statistics", () => {
  it("nearest-rank percentiles", () => {
    const xs = Array.from({ length: 100 }, (_, i) => i + 1);
    assert.equal(percentile(xs, 50), 50);
    assert.equal(percentile(xs, 99), 99);
    assert.equal(percentile(xs, 100), 100);
    assert.equal(percentile([7], 99), 7);
    assert.ok(Number.isNaN(percentile([], 50)));
  });

  it("summarizes unsorted latencies", () => {
    const s = summarizeLatency([30, 10, 20, 40]);
    assert.deepEqual(s, { samples: 4, p50Ms: 20, p95Ms: 40, p99Ms: 40, maxMs: 40, meanMs: 25 });
  });

  it("summarizes API calls per reconcile as a histogram", () => {
    assert.deepEqual(summarizeCounts([3, 3, 5]), { count: 3, mean: 3.67, min: 3, max: 5, histogram: { "3": 2, "5": 1 } });
  });
});
