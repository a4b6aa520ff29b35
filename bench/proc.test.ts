import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { cpuSeconds, machineTicks, metricValues, rssBytes } from "./proc.ts";

describe("process probes", () => {
  it("reads this process's RSS and CPU time, and the machine's ticks", () => {
    assert.ok((rssBytes(process.pid) ?? 0) > 1024 * 1024);
    assert.ok((cpuSeconds(process.pid) ?? -1) >= 0);
    const t = machineTicks();
    assert.ok(t.total > t.busy && t.busy > 0);
    assert.equal(rssBytes(2 ** 30), undefined);
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
});
