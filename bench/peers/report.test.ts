import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { median, medians, ratios, tracingCost, type Medians } from "./report.ts";
import type { RunResult } from "./run.ts";

/** A crdfn run as far as the medians and tracing's cost read it. */
const crdfnRun = (traced: boolean, p50Ms: number, bridge: number, functions: number): RunResult =>
  ({
    system: "crdfn",
    round: 1,
    traced,
    rated: { latency: { samples: 100, p50Ms }, cpuSeconds: { bridge, functions, apiServer: 9 } },
    setup: {},
    closedLoop: { latency: {} },
  }) as unknown as RunResult;

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

  it("tracing's cost: crdfn's bridge and function process per change and p50, traced against untraced; the medians leave the traced runs out", () => {
    const runs = [crdfnRun(false, 40, 0.5, 1.5), crdfnRun(true, 44, 0.6, 1.9)];
    assert.deepEqual(tracingCost(runs), { off: { cpuMsPerChange: 20, p50Ms: 40, changes: 100 }, on: { cpuMsPerChange: 25, p50Ms: 44, changes: 100 } });
    assert.equal(medians(runs).crdfn?.["rated p50 (ms)"], 40);
    assert.equal(tracingCost(runs.slice(0, 1)), null);
  });
});
