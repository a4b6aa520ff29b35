import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { availableParallelism } from "node:os";
import { busyPercent, coreTicks, cpuSeconds, machineTicks, metricSum, metricValues, rssBytes } from "./proc.ts";

describe("process probes", () => {
  it("reads this process's RSS and CPU time, and the machine's ticks", () => {
    assert.ok((rssBytes(process.pid) ?? 0) > 1024 * 1024);
    assert.ok((cpuSeconds(process.pid) ?? -1) >= 0);
    const t = machineTicks();
    assert.ok(t.total > t.busy && t.busy > 0);
    assert.equal(rssBytes(2 ** 30), undefined);
  });

  it("reads each core's ticks, and how busy an interval was", () => {
    const cores = coreTicks();
    assert.ok(cores.length >= availableParallelism(), `${cores.length} cores read`);
    for (const c of cores) assert.ok(c.total >= c.busy && c.busy >= 0);
    assert.equal(busyPercent({ busy: 100, total: 400 }, { busy: 175, total: 500 }), 75);
    assert.equal(busyPercent({ busy: 1, total: 2 }, { busy: 1, total: 2 }), 0);
  });

  it("picks unlabelled metrics out of a Prometheus exposition", () => {
    const text = [
      "# HELP process_resident_memory_bytes Resident memory size in bytes.",
      "process_resident_memory_bytes 61440000",
      'nodejs_heap_size_used_bytes{space="x"} 1',
      "nodejs_heap_size_used_bytes 2.5e7",
    ].join("\n");
    assert.deepEqual(metricValues(text, ["process_resident_memory_bytes", "nodejs_heap_size_used_bytes"]), {
      process_resident_memory_bytes: 61440000,
      nodejs_heap_size_used_bytes: 25000000,
    });
  });

  it("sums a labelled counter over its label sets", () => {
    const text = [
      "# HELP crdfn_bridge_events_published_total Key events accepted by the queue",
      'crdfn_bridge_events_published_total{type="MODIFIED"} 12',
      'crdfn_bridge_events_published_total{type="ADDED"} 3',
      "crdfn_bridge_events_published_totalx 100",
    ].join("\n");
    assert.equal(metricSum(text, "crdfn_bridge_events_published_total"), 15);
    assert.equal(metricSum(text, "crdfn_bridge_pending_events"), 0);
  });
});
