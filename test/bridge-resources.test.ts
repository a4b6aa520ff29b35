// Each watched resource on its own, and configuration problems said in one line: a bridge whose
// FIRST resource's CRD is missing publishes the others' events at once, reports each resource in
// /readyz, and picks the CRD up within seconds of its creation.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { createServer, type AddressInfo } from "node:net";
import type { SQSClient } from "@aws-sdk/client-sqs";
import { Registry } from "prom-client";
import { startBridge, type RunningBridge } from "../bridge/bridge.ts";
import { serveHealth, type HealthServer } from "../bridge/health-server.ts";
import { writeFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { bridgeConfig, bridgeEnv, spawnBridge, startBridgeEnvironment, testLogger, type BridgeProcess } from "./support/bridge-environment.ts";
import type { TestCluster } from "./support/test-cluster.ts";
import { crontab, crontabPath } from "./support/crontabs.ts";
import { kube, ok } from "./support/kube-requests.ts";
import { metricValue, scrapeMetrics } from "./support/metrics.ts";
import { withTimeout } from "./support/promises.ts";
import { eventually } from "./support/eventually.ts";
import { QueueReader } from "./support/queue-reader.ts";
import { TEST_EVENT_KEY } from "./support/event-key.ts";

/** /readyz of a bridge process once `line` shows in its body (or the deadline passes). */
async function readyzOnce(p: BridgeProcess, line: RegExp, timeoutMs = 20_000): Promise<{ status: number; body: string }> {
  const port = await withTimeout(p.port, 20_000, "bridge started");
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const res = await fetch(`http://127.0.0.1:${port}/readyz`);
    const got = { status: res.status, body: await res.text() };
    if (line.test(got.body) || Date.now() > deadline) return got;
    await new Promise((r) => setTimeout(r, 250));
  }
}

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
  let cluster: TestCluster;
  let sqs: SQSClient;
  let bridge: RunningBridge | undefined;
  let health: HealthServer | undefined;
  const registry = new Registry();

  before(async () => {
    env = await startBridgeEnvironment({ file: import.meta.filename });
    ({ cluster, sqs } = env);
  });
  after(async () => {
    await health?.close();
    await bridge?.stop(1000);
    await env?.stop();
  });

  it("a missing CRD first in the list: the others publish at once, /readyz says which, the CRD is picked up within 10 s", { timeout: 90_000 }, async () => {
    const kc = cluster.kubeConfig;
    bridge = startBridge(bridgeConfig(cluster, { CRDFN_RESOURCES: `${WIDGETS}, stable.example.com/v1/crontabs>batch/v1/cronjobs` }), {
      eventKey: TEST_EVENT_KEY,
      kubeConfig: kc,
      sqs,
      logger: testLogger(),
      registry,
    });
    health = await serveHealth(bridge, 0, "127.0.0.1");
    await withTimeout(bridge.ready, 20_000, "ready while one CRD is missing");
    const reader = new QueueReader(sqs, cluster.sqs.queues.fifo);

    await ok(kube(kc, "POST", crontabPath(cluster.namespace), crontab("early")), "crontab");
    await reader.until(() => reader.byName(cluster.namespace).has("early"), 5000);
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
      const r = await kube(kc, "POST", `/apis/late.example.com/v1/namespaces/${cluster.namespace}/widgets`, widget);
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
    const p = spawnBridge(bridgeEnv(cluster, { CRDFN_QUEUE_URL: cluster.sqs.queues.fifo.replace(/\.fifo$/, "") }));
    assert.equal(await withTimeout(p.exited, 20_000, "exit"), 2);
    const out = p.logs.join("");
    assert.match(out, /^CRDFN_QUEUE_URL: is not a FIFO queue/m);
    assert.doesNotMatch(out, /^CRDFN_QUEUE_MODE/m);
  });

  it("a refused credential: said once, naming the kubeconfig, and not ready (body + metric) while it lasts", async () => {
    const dir = mkdtempSync(join(tmpdir(), "crdfn-badtoken-"));
    const kubeconfig = join(dir, "kubeconfig");
    writeFileSync(
      kubeconfig,
      JSON.stringify({
        apiVersion: "v1",
        kind: "Config",
        clusters: [{ name: "c", cluster: { server: cluster.server, "certificate-authority": cluster.caPath } }],
        users: [{ name: "broken", user: { token: "not-a-token" } }],
        contexts: [{ name: "bad", context: { cluster: "c", user: "broken" } }],
        "current-context": "bad",
      }),
    );
    const p = spawnBridge(bridgeEnv(cluster, { KUBECONFIG: kubeconfig }));
    try {
      const { status, body } = await readyzOnce(p, /refused/);
      assert.equal(status, 503, body);
      assert.match(body, new RegExp(`refused the bridge's credential \\(401 .*kubeconfig ${kubeconfig}, context bad, user broken`));
      // Retried since (a positive signal, not a pause): each watched kind's discovery refused again, four times in all.
      const port = await p.port;
      await eventually(
        async () => assert.ok(((await scrapeMetrics(port)).get("crdfn_bridge_discovery_failures_total") ?? 0) >= 4, "the refused discoveries retried"),
        { timeoutMs: 30_000, intervalMs: 250 },
      );
      const refusals = p.logs.filter((l) => l.includes("refused the bridge's credential"));
      assert.equal(refusals.length, 1, `said once, not per resource or retry: ${refusals.length}`);
      assert.equal((await scrapeMetrics(await p.port)).get("crdfn_bridge_problem"), 1);
    } finally {
      p.child.kill("SIGTERM");
      await p.exited;
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("a queue that does not exist: not ready, and /readyz names CRDFN_QUEUE_URL", async () => {
    const missing = cluster.sqs.queues.fifo.replace(/[^/]+$/, "no-such-queue.fifo");
    const p = spawnBridge(bridgeEnv(cluster, { CRDFN_QUEUE_URL: missing }));
    try {
      const { status, body } = await readyzOnce(p, /does not exist/);
      assert.equal(status, 503, body);
      assert.match(body, new RegExp(`CRDFN_QUEUE_URL: the queue ${missing} does not exist`));
    } finally {
      p.child.kill("SIGTERM");
      await p.exited;
    }
  });
});
