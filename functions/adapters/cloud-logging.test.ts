import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { Writable } from "node:stream";
import { LOG_DISTRIBUTIONS, METRIC_MARKER } from "../../core/cloud-logging-metrics.ts";
import { METRIC } from "../runtime/metrics.ts";
import { cloudLoggingLogger, cloudLoggingMetrics } from "./cloud-logging.ts";

describe("Cloud Logging's structured JSON", () => {
  it("writes a reconcile's measurements as one line log-based metrics read, under controller-runtime's names", () => {
    const lines: string[] = [];
    cloudLoggingMetrics("prod", (l) => lines.push(l)).observe({
      controller: "greeting",
      outcome: { result: "retry", detail: "x" },
      apiCalls: 4,
      seconds: 0.25,
    });
    assert.equal(lines.length, 1);
    assert.ok(lines[0]!.endsWith("\n"));
    assert.deepEqual(JSON.parse(lines[0]!), {
      severity: "WARNING",
      message: "reconcile error",
      [METRIC_MARKER.field]: METRIC_MARKER.value,
      cluster: "prod",
      controller: "greeting",
      result: "error",
      error: true,
      terminal: false,
      reconcileTimeSeconds: 0.25,
      apiCalls: 4,
    });
    assert.deepEqual(
      LOG_DISTRIBUTIONS.map((d) => d.name).sort(),
      [METRIC.reconcileTime, METRIC.apiCalls, METRIC.eventLag].sort(),
      "the same names as the Prometheus and EMF metrics",
    );
  });

  it("logs with severity and message, as Cloud Logging reads them", async () => {
    let out = "";
    const sink = new Writable({ write: (c: Buffer, _e, done) => ((out += c.toString()), done()) });
    cloudLoggingLogger("info", sink).warn({ cluster: "prod" }, "API server unavailable");
    await new Promise((r) => setImmediate(r));
    const line = JSON.parse(out) as Record<string, unknown>;
    assert.equal(line.severity, "WARNING");
    assert.equal(line.message, "API server unavailable");
    assert.equal(line.cluster, "prod");
    assert.equal(typeof line.time, "string");
  });
});
