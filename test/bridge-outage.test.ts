import { describe, it, before, after } from "node:test";
import assert from "node:assert/strict";
import type { SQSClient } from "@aws-sdk/client-sqs";
import { Registry } from "prom-client";
import { startBridge, type RunningBridge } from "../bridge/bridge.ts";
import { bridgeConfig, startBridgeEnvironment, testLogger } from "./support/bridge-environment.ts";
import type { TestCluster } from "./support/test-cluster.ts";
import { crontab, crontabPath } from "./support/crontabs.ts";
import { kube, ok, rvOf } from "./support/kube-requests.ts";
import { metricValue } from "./support/metrics.ts";
import { parallel } from "./support/promises.ts";
import { type Expected, mismatches, orderViolations, QueueReader } from "./support/queue-reader.ts";
import { TEST_EVENT_KEY } from "./support/event-key.ts";

const MAX_PENDING = 100;

describe("bridge: queue outage", { timeout: 240_000 }, () => {
  let env: Awaited<ReturnType<typeof startBridgeEnvironment>>;
  let cluster: TestCluster;
  let sqs: SQSClient;
  let bridge: RunningBridge;
  const registry = new Registry();

  before(async () => {
    // It stops the queue server: servers of its own.
    env = await startBridgeEnvironment({ file: import.meta.filename, own: true, namespaces: ["outage"] });
    ({ cluster, sqs } = env);
    bridge = startBridge(bridgeConfig(cluster, { CRDFN_MAX_PENDING: String(MAX_PENDING) }), {
      eventKey: TEST_EVENT_KEY,
      kubeConfig: cluster.kubeConfig,
      sqs,
      logger: testLogger(),
      registry,
    });
    await bridge.ready;
  });

  after(async () => {
    await bridge?.stop(1000);
    await env?.stop();
  });

  it("ElasticMQ stopped for 20 s during churn and started again: 0 lost, buffer bounded", { timeout: 180_000 }, async () => {
    const ns = cluster.ns("outage");
    const kc = cluster.kubeConfig;
    const reader = new QueueReader(sqs, cluster.sqs.queues.fifo);
    const names = Array.from({ length: 300 }, (_, i) => `ct-${i}`);
    const expected = new Map<string, Expected>();
    await parallel(names, 20, async (name) =>
      expected.set(name, { deleted: false, resourceVersion: rvOf(await ok(kube(kc, "POST", crontabPath(ns), crontab(name)), name)) }),
    );
    await reader.until(() => mismatches(reader.byName(ns), expected).length === 0, 30_000);

    await cluster.queue.stop();
    const outageStart = Date.now();
    let maxPending = 0;
    const sampler = setInterval(() => (maxPending = Math.max(maxPending, bridge.pendingCount())), 50);
    try {
      // Churn through the outage: more changed objects than the buffer may hold.
      const more = Array.from({ length: 200 }, (_, i) => `new-${i}`);
      await parallel(more, 10, async (name) =>
        expected.set(name, { deleted: false, resourceVersion: rvOf(await ok(kube(kc, "POST", crontabPath(ns), crontab(name)), name)) }),
      );
      for (const replicas of [2, 3]) {
        await parallel(names, 10, async (name) =>
          expected.set(name, {
            deleted: false,
            resourceVersion: rvOf(await ok(kube(kc, "PATCH", crontabPath(ns, name), { spec: { replicas } }, "application/merge-patch+json"), name)),
          }),
        );
      }
      await parallel(names.slice(0, 50), 10, async (name) => {
        await ok(kube(kc, "DELETE", crontabPath(ns, name)), name);
        expected.set(name, { deleted: true });
      });
      const left = 20_000 - (Date.now() - outageStart);
      if (left > 0) await new Promise((r) => setTimeout(r, left));
      assert.equal(bridge.pendingCount(), MAX_PENDING, "the buffer filled up and the watch stopped there");
      assert.ok((await metricValue(registry, "crdfn_bridge_publish_failures_total")) > 0);
    } finally {
      clearInterval(sampler);
      await cluster.queue.start();
    }

    await reader.until(
      () => mismatches(reader.byName(ns), expected).length === 0,
      90_000,
      () => mismatches(reader.byName(ns), expected).slice(0, 5).join("; "),
    );
    assert.ok(maxPending <= MAX_PENDING, `pending peaked at ${maxPending}`);
    assert.deepEqual(orderViolations(reader.byName(ns)), []);
    assert.equal(await metricValue(registry, "crdfn_bridge_pending_events"), 0);
  });
});
