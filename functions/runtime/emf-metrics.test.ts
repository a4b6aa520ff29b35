// The runtime's metrics under controller-runtime's names: Prometheus (prometheus-metrics.ts) and, on Lambda,
// the CloudWatch EMF lines Powertools writes to stdout (emf-metrics.ts), one flush per invocation.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { Registry } from "prom-client";
import type { Context, SQSEvent } from "aws-lambda";
import greeting from "../../examples/greeting/operator.ts";
import { lambdaHandler } from "../adapters/lambda.ts";
import { createEmfMetrics } from "./emf-metrics.ts";
import type { Measurement } from "./metrics.ts";
import { createRuntimeMetrics } from "./prometheus-metrics.ts";
import type { Outcome } from "./outcome.ts";
import { fakeRuntime } from "../../test/support/fake-runtime.ts";

type Emf = Record<string, unknown> & {
  _aws: { Timestamp: number; CloudWatchMetrics: Array<{ Namespace: string; Dimensions: string[][]; Metrics: Array<{ Name: string; Unit: string }> }> };
};

/** The JSON lines written to stdout while `run` runs. */
async function stdoutLines(run: () => unknown): Promise<Emf[]> {
  const lines: string[] = [];
  const write = process.stdout.write.bind(process.stdout);
  process.stdout.write = (chunk: string | Uint8Array) => {
    lines.push(...String(chunk).split("\n").filter(Boolean));
    return true;
  };
  try {
    await run();
  } finally {
    process.stdout.write = write;
  }
  return lines.map((l) => JSON.parse(l) as Emf);
}

// Powertools refuses timestamps more than 2 hours from its own clock.
const at = new Date(Math.floor(Date.now() / 1000) * 1000);
const measured = (outcome: Outcome, seconds = 0.2): Measurement => ({ controller: "greeting", outcome, apiCalls: 2, seconds, lagSeconds: 0.5 });
const outcomes: Outcome[] = [
  { result: "success" },
  { result: "success", requeue: "after" },
  { result: "retry", detail: "boom" },
  { result: "retry-later", delaySeconds: 5, detail: "not yet" },
  { result: "permanent", detail: "ChildConflict" },
];

describe("runtime metrics", () => {
  it("Prometheus: controller-runtime's names and labels, with the cluster", async () => {
    const registry = new Registry();
    const metrics = createRuntimeMetrics(registry, "prod");
    for (const o of outcomes) metrics.observe(measured(o));
    const total = (await registry.getSingleMetric("controller_runtime_reconcile_total")?.get())?.values ?? [];
    const byResult = Object.fromEntries(total.map((v) => [String(v.labels.result), v.value]));
    assert.deepEqual(byResult, { success: 1, requeue_after: 1, requeue: 0, error: 3 });
    assert.ok(total.every((v) => v.labels.cluster === "prod" && v.labels.controller === "greeting"));
    const count = async (name: string) => (await registry.getSingleMetric(name)?.get())?.values.reduce((n, v) => n + v.value, 0);
    assert.equal(await count("controller_runtime_reconcile_errors_total"), 3);
    assert.equal(await count("controller_runtime_terminal_reconcile_errors_total"), 1);
    const time = await registry.getSingleMetricAsString("controller_runtime_reconcile_time_seconds");
    assert.match(time, /controller_runtime_reconcile_time_seconds_count\{cluster="prod",controller="greeting"\} 5/);
  });

  it("EMF: the same names, one line per dimension set, written only on flush", async () => {
    const emf = createEmfMetrics({ namespace: "crdfn", serviceName: "greeting-fn", clock: () => at });
    const metrics = emf.forCluster("prod");
    const quiet = await stdoutLines(() => outcomes.forEach((o, i) => metrics.observe(measured(o, i / 10))));
    assert.deepEqual(quiet, [], "nothing before the flush");
    const lines = await stdoutLines(() => emf.flush());
    const perController = lines.find((l) => l.result === undefined);
    assert.ok(perController);
    const meta = perController._aws.CloudWatchMetrics[0];
    assert.equal(meta?.Namespace, "crdfn");
    assert.equal(perController._aws.Timestamp, at.getTime());
    assert.deepEqual(new Set(meta?.Dimensions[0]), new Set(["service", "cluster", "controller"]));
    assert.deepEqual([perController.service, perController.cluster, perController.controller], ["greeting-fn", "prod", "greeting"]);
    const units = Object.fromEntries((meta?.Metrics ?? []).map((m) => [m.Name, m.Unit]));
    assert.deepEqual(units, {
      controller_runtime_reconcile_errors_total: "Count",
      controller_runtime_terminal_reconcile_errors_total: "Count",
      controller_runtime_reconcile_time_seconds: "Seconds",
      crdfn_reconcile_api_calls: "Count",
      crdfn_event_lag_seconds: "Seconds",
    });
    // Every observation kept as a value: CloudWatch computes sums and percentiles from them.
    assert.deepEqual(perController.controller_runtime_reconcile_time_seconds, [0, 0.1, 0.2, 0.3, 0.4]);
    assert.deepEqual(perController.controller_runtime_reconcile_errors_total, [1, 1, 1]);
    assert.equal(perController.controller_runtime_terminal_reconcile_errors_total, 1);
    const totals = Object.fromEntries(lines.filter((l) => l.result !== undefined).map((l) => [String(l.result), l.controller_runtime_reconcile_total]));
    assert.deepEqual(totals, { success: 1, requeue_after: 1, error: [1, 1, 1] });
    for (const l of lines.filter((x) => x.result !== undefined)) {
      assert.deepEqual(new Set(l._aws.CloudWatchMetrics[0]?.Dimensions[0]), new Set(["service", "cluster", "controller", "result"]));
    }
    assert.deepEqual(await stdoutLines(() => emf.flush()), [], "a flush with nothing new writes nothing");
  });

  it("the Lambda handler flushes once per invocation, after the batch", async () => {
    const emf = createEmfMetrics({ namespace: "crdfn", serviceName: "greeting-fn", clock: () => at });
    const metrics = emf.forCluster("prod");
    const runtime = fakeRuntime(
      () => {
        metrics.observe(measured({ result: "success" }));
        return { result: "success" as const, apiCalls: 2 };
      },
      () => emf.flush(),
    );
    const handler = lambdaHandler(greeting, { runtime });
    const record = (id: string) => ({ messageId: id, body: "{}", eventSourceARN: "arn:aws:sqs:us-east-1:0:q", attributes: {}, messageAttributes: {} });
    const event = { Records: [record("m1"), record("m2"), record("m3")] } as unknown as SQSEvent;
    const lines = await stdoutLines(() => handler(event, {} as Context));
    const success = lines.find((l) => l.result === "success");
    assert.deepEqual(success?.controller_runtime_reconcile_total, [1, 1, 1], "one document for the whole batch");
    assert.equal(lines.length, 2, "one line per dimension set");
  });
});
