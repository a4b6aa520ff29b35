// Each watched resource on its own, and configuration problems said in one line: a bridge whose
// FIRST resource's CRD is missing publishes the others' events at once, reports each resource in
// /readyz, and picks the CRD up within seconds of its creation.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:net";
import type { AddressInfo } from "node:net";
import type { SQSClient } from "@aws-sdk/client-sqs";
import { Registry } from "prom-client";
import { startBridge, type RunningBridge } from "../bridge/bridge.ts";
import { serveHealth, type HealthServer } from "../bridge/health-server.ts";
import type { LocalCluster } from "../emulator/types.ts";
import { QueueReader, bridgeConfig, bridgeEnv, crontab, crontabPath, kube, metricValue, ok, spawnBridge, startBridgeEnvironment, testLogger, withTimeout } from "./bridge-helpers.ts";

const WIDGETS = "late.example.com/v1/widgets";
const widgetCrd = {
  apiVersion: "apiextensions.k8s.io/v1",
  kind: "CustomResourceDefinition",
  metadata: { name: "widgets.late.example.com" },
  spec: {
    group: "late.example.com",
    scope: "Namespaced",
    names: { plural: "widgets", singular: "widget", kind: "Widget" },
    versions: [{ name: "v1", served: true, storage: true, schema: { openAPIV3Schema: { type: "object", "x-kubernetes-preserve-unknown-fields": true } } }],
  },
};

describe("bridge: resources watched independently; configuration errors in one line", { timeout: 180_000 }, () => {
  let env: Awaited<ReturnType<typeof startBridgeEnvironment>>;
  let cluster: LocalCluster;
  let sqs: SQSClient;
  let bridge: RunningBridge | undefined;
  let health: HealthServer | undefined;
  const registry = new Registry();

  before(async () => {
    env = await startBridgeEnvironment();
    ({ cluster, sqs } = env);
  });
  after(async () => {
    await health?.close();
    await bridge?.stop(1000);
    await env?.stop();
  });

  it("a missing CRD first in the list: the others publish at once, /readyz says which, the CRD is picked up within 10 s", { timeout: 90_000 }, async () => {
    const kc = cluster.kubeConfig;
    bridge = startBridge(bridgeConfig(cluster, { CRDFN_RESOURCES: `${WIDGETS}, stable.example.com/v1/crontabs>batch/v1/cronjobs` }), { kubeConfig: kc, sqs, logger: testLogger(), registry });
    health = await serveHealth(bridge, 0, "127.0.0.1");
    await withTimeout(bridge.ready, 20_000, "ready while one CRD is missing");
    const reader = new QueueReader(sqs, cluster.sqs.queues.fifo);

    await ok(kube(kc, "POST", crontabPath("default"), crontab("early")), "crontab");
    await reader.until(() => reader.byName("default").has("early"), 5000);
    const readyz = await fetch(`http://127.0.0.1:${health.port}/readyz`);
    const body = await readyz.text();
    assert.equal(readyz.status, 200, body);
    assert.match(body, /late\.example\.com\/v1\/widgets: not-served/);
    assert.match(body, /stable\.example\.com\/v1\/crontabs: synced/);
    assert.equal(await metricValue(registry, "crdfn_bridge_resource_state", { resource: WIDGETS, state: "not-served" }), 1);

    const created = Date.now();
    await ok(kube(kc, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", widgetCrd), "widget CRD");
    const widget = { apiVersion: "late.example.com/v1", kind: "Widget", metadata: { name: "w1" } };
    // The API server serves the new resource a moment after the CRD exists: create as soon as it does.
    for (;;) {
      const r = await kube(kc, "POST", "/apis/late.example.com/v1/namespaces/default/widgets", widget);
      if (r.status < 300) break;
      await new Promise((res) => setTimeout(res, 200));
    }
    await reader.until(() => reader.all.some((r) => r.event.plural === "widgets" && r.event.name === "w1"), 10_000 - (Date.now() - created));
    console.log(`# widget event published ${((Date.now() - created) / 1000).toFixed(1)} s after its CRD was created`);
    assert.match(await (await fetch(`http://127.0.0.1:${health.port}/readyz`)).text(), /late\.example\.com\/v1\/widgets: synced/);
  });

  it("a port in use: one line naming CRDFN_HTTP_PORT, exit code 2", async () => {
    const blocker = createServer();
    await new Promise<void>((r) => blocker.listen(0, "0.0.0.0", r));
    try {
      const port = (blocker.address() as AddressInfo).port;
      const p = spawnBridge(bridgeEnv(cluster, { CRDFN_HTTP_PORT: String(port), CRDFN_LOG_LEVEL: "error" }));
      assert.equal(await withTimeout(p.exited, 20_000, "exit"), 2);
      const errors = p.logs.join("").trim().split("\n");
      assert.deepEqual(errors, [`crdfn bridge: CRDFN_HTTP_PORT: port ${port} is in use by another process; choose another port`]);
    } finally {
      blocker.close();
    }
  });

  it("a non-FIFO URL in fifo mode: the URL is named as not a FIFO queue, exit code 2", async () => {
    const p = spawnBridge(bridgeEnv(cluster, { CRDFN_QUEUE_URL: cluster.sqs.queues.standard }));
    assert.equal(await withTimeout(p.exited, 20_000, "exit"), 2);
    const out = p.logs.join("");
    assert.match(out, /^CRDFN_QUEUE_URL: is not a FIFO queue/m);
    assert.doesNotMatch(out, /^CRDFN_QUEUE_MODE/m);
  });
});
