// One function fleet, two clusters: two real control planes, each with its own bridge, feeding
// ONE queue consumed by ONE function host built from a two-entry cluster registry. Objects with
// the same namespace and name live in both clusters; nothing may cross. Cluster A may be a shared
// control plane (its queue server hosts the fleet's queues); B is this file's own, since its API
// server is stopped.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { Writable } from "node:stream";
import { ReceiveMessageCommand, SendMessageCommand, type SQSClient } from "@aws-sdk/client-sqs";
import { CoreV1Api, CustomObjectsApi, Watch } from "@kubernetes/client-node";
import { pino } from "pino";
import { Registry } from "prom-client";
import { startBridge, type RunningBridge } from "../bridge/bridge.ts";
import { loadBridgeConfig } from "../bridge/config.ts";
import { deduplicationId, encodeKeyEvent, messageGroupId, type KeyEvent } from "../core/event.ts";
import type { Operator } from "../core/operator.ts";
import { sqsClient } from "../clients/sqs-client.ts";
import greeting, { configMapName } from "../examples/greeting/operator.ts";
import { startPoller, type Poller } from "../functions/adapters/poller.ts";
import { givenSqsClient } from "../functions/runtime/sqs-client.ts";
import { buildFromEnv } from "../functions/runtime/entry.ts";
import { createRuntimeMetrics } from "../functions/runtime/prometheus-metrics.ts";
import { createKubeApi } from "../functions/runtime/kube-api-http.ts";
import type { Runtime } from "../functions/runtime/runtime.ts";
import { installCrd, ready, waitFor, type Cr } from "./support/functions-environment.ts";
import { queueDepth } from "./support/settled.ts";
import { testCluster, type TestCluster } from "./support/test-cluster.ts";
import { formatEventKey, type EventKey } from "../core/event-auth.ts";
import { signedForTest, testOperatorKey } from "./support/event-key.ts";

const op = greeting as Operator<unknown>;
/** The same namespace name in both clusters: this file's own. */
let NS = "";
const base = () => ({ group: op.resource.group, version: op.resource.version, plural: op.resource.plural, namespace: NS });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const p50 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)] ?? NaN;

interface Side {
  id: "a" | "b";
  cluster: TestCluster;
  custom: CustomObjectsApi;
  core: CoreV1Api;
  bridge?: RunningBridge;
}

describe("one function host, two clusters", { timeout: 600_000 }, () => {
  const sides = {} as Record<"a" | "b", Side>;
  // A key per cluster: each bridge holds its own, the function fleet the operator's key of each.
  const keys: Record<"a" | "b", EventKey> = { a: { kid: "ka", secret: Buffer.alloc(32, 0xa) }, b: { kid: "kb", secret: Buffer.alloc(32, 0xb) } };
  /** As cluster `cluster`'s bridge signs: with the operator's key under that cluster's key. */
  const signedAs = (cluster: "a" | "b", e: KeyEvent): KeyEvent => signedForTest(e, keys[cluster]);
  let sqs: SQSClient;
  let poller: Poller | undefined;
  const logs: Array<Record<string, unknown>> = [];
  const registry = new Registry();
  /** Function-side handling time of every message, by the cluster it named. */
  const handled: Array<{ cluster: string; ms: number; at: number }> = [];

  const get = async (s: Side, name: string): Promise<Cr | undefined> => {
    try {
      return (await s.custom.getNamespacedCustomObject({ ...base(), name })) as Cr;
    } catch (e) {
      if ((e as { code?: number }).code === 404) return undefined;
      throw e;
    }
  };
  const configMap = async (s: Side, name: string) => {
    try {
      return await s.core.readNamespacedConfigMap({ name: configMapName(name), namespace: NS });
    } catch {
      return undefined;
    }
  };
  const create = (s: Side, name: string, message: string) =>
    s.custom.createNamespacedCustomObject({
      ...base(),
      body: { apiVersion: op.apiVersion, kind: op.resource.kind, metadata: { name }, spec: { message } },
    }) as Promise<Cr>;
  const patch = (s: Side, name: string, message: string) =>
    s.custom.patchNamespacedCustomObject({ ...base(), name, body: [{ op: "replace", path: "/spec/message", value: message }] }) as Promise<Cr>;
  /** Converged: the ConfigMap holds this message and status has seen the latest generation. */
  const converged = async (s: Side, name: string, message: string) => {
    const [cr, cm] = await Promise.all([get(s, name), configMap(s, name)]);
    return cm?.data?.message === message && ready(cr)?.status === "True" && cr?.status?.observedGeneration === cr?.metadata?.generation;
  };
  const listReady = async (s: Side, prefix: string): Promise<Set<string>> => {
    const list = (await s.custom.listNamespacedCustomObject(base())) as { items: Cr[] };
    return new Set(list.items.filter((i) => i.metadata?.name?.startsWith(prefix) && ready(i)?.status === "True").map((i) => i.metadata?.name ?? ""));
  };
  const queues = () => sides.a.cluster.sqs.queues;
  /** Nothing left to do: the fleet's queue is empty (every reconcile's writes done) and neither bridge holds anything, twice in a row. */
  const atRest = async () => {
    let before = false;
    await waitFor(
      "both clusters at rest",
      async () => {
        const now = (await queueDepth(sqs, queues().fifo)) === 0 && Object.values(sides).every((s) => s.bridge?.pendingCount() === 0);
        const twice = now && before;
        before = now;
        return twice;
      },
      60_000,
    );
  };

  before(async () => {
    const a = await testCluster({ file: import.meta.filename });
    // B uses A's queue server: the fleet's queues, fed by both clusters' bridges.
    const b = await testCluster({ file: import.meta.filename, own: { queue: false } });
    NS = a.namespace;
    assert.equal(b.namespace, NS);
    for (const [id, cluster] of [
      ["a", a],
      ["b", b],
    ] as const) {
      sides[id] = { id, cluster, custom: cluster.kubeConfig.makeApiClient(CustomObjectsApi), core: cluster.kubeConfig.makeApiClient(CoreV1Api) };
      await installCrd(createKubeApi({ connection: cluster.kubeConfig }), op);
    }
    sqs = sqsClient(a.sqs);
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        for (const line of chunk.toString("utf8").split("\n")) if (line) logs.push(JSON.parse(line) as Record<string, unknown>);
        done();
      },
    });
    const logger = pino({ level: "info" }, sink);
    const quiet = pino({ level: "silent" });

    for (const s of Object.values(sides)) {
      const config = loadBridgeConfig({
        CRDFN_CLUSTER: s.id,
        CRDFN_QUEUE_URL: queues().fifo,
        CRDFN_RESOURCES: "example.com/v1/greetings>v1/configmaps",
        CRDFN_NAMESPACES: NS,
        CRDFN_RESYNC_SECONDS: "0",
        CRDFN_HTTP_PORT: "0",
        AWS_REGION: a.sqs.region,
        AWS_ENDPOINT_URL_SQS: a.sqs.endpoint,
      });
      s.bridge = startBridge(config, { eventKey: keys[s.id], kubeConfig: s.cluster.kubeConfig, sqs, logger: quiet });
      await s.bridge.ready;
    }

    // The function host: exactly what a Lambda would build, from one registry setting.
    const built = buildFromEnv(
      op,
      {
        ...a.env,
        CRDFN_CLUSTERS: JSON.stringify({ a: { auth: "kubeconfig", kubeconfig: a.kubeconfigPath }, b: { auth: "kubeconfig", kubeconfig: b.kubeconfigPath } }),
        // Each cluster's key of this operator (the bridges hold the clusters' keys).
        CRDFN_EVENT_KEYS: `a/${formatEventKey(testOperatorKey(op.resource, keys.a))},b/${formatEventKey(testOperatorKey(op.resource, keys.b))}`,
      },
      { metrics: (cluster) => createRuntimeMetrics(registry, cluster), logger },
    );
    assert.deepEqual([...built.clusters.keys()], ["a", "b"]);
    const timed: Runtime = {
      ...built.runtime,
      async handle(delivery) {
        const t0 = performance.now();
        const outcome = await built.runtime.handle(delivery);
        handled.push({ cluster: delivery.ok ? delivery.event.cluster : "?", ms: performance.now() - t0, at: Date.now() });
        return outcome;
      },
    };
    poller = startPoller({
      sqs: givenSqsClient(sqs),
      queueUrls: [queues().fifo],
      runtime: timed,
      batchSize: 10,
      waitTimeSeconds: 1,
      visibilityTimeout: 5,
      logger,
    });
  });

  after(async () => {
    await poller?.stop();
    for (const s of Object.values(sides)) await s.bridge?.stop();
    for (const s of Object.values(sides)) await s.cluster.stop();
  });

  it("the same namespace/name converges to its own spec in its own cluster", { timeout: 120_000 }, async () => {
    await Promise.all([create(sides.a, "same", "from A"), create(sides.b, "same", "from B")]);
    await waitFor("A converged", () => converged(sides.a, "same", "from A"), 60_000);
    await waitFor("B converged", () => converged(sides.b, "same", "from B"), 60_000);
    const children = [(await configMap(sides.a, "same"))?.data?.message, (await configMap(sides.b, "same"))?.data?.message];
    assert.deepEqual(children, ["from A", "from B"]);
    // Logs and metrics carry the cluster.
    const handledLines = logs.filter((l) => l.msg === "handled" && l.object === `${NS}/same`);
    assert.deepEqual(new Set(handledLines.map((l) => l.cluster)), new Set(["a", "b"]));
    const totals = (await registry.getSingleMetric("controller_runtime_reconcile_total")?.get())?.values ?? [];
    assert.deepEqual(new Set(totals.filter((v) => v.value > 0).map((v) => v.labels.cluster)), new Set(["a", "b"]));
  });

  const aAloneMs: number[] = [];

  it("a change in A never touches B (B watched during A's churn)", { timeout: 180_000 }, async () => {
    // Once B's own echoes (status write, ConfigMap added) have passed, watch everything of B's.
    await atRest();
    const before = { cr: (await get(sides.b, "same"))?.metadata?.resourceVersion, cm: (await configMap(sides.b, "same"))?.metadata?.resourceVersion };
    const rv = (await sides.b.core.listNamespacedConfigMap({ namespace: NS })).metadata?.resourceVersion ?? "0";
    const seen: string[] = [];
    const watch = new Watch(sides.b.cluster.kubeConfig);
    const watches = await Promise.all(
      [`/apis/example.com/v1/namespaces/${NS}/greetings`, `/api/v1/namespaces/${NS}/configmaps`].map((path) =>
        watch.watch(
          path,
          { resourceVersion: rv, allowWatchBookmarks: false },
          (type, obj: Cr) => seen.push(`${type} ${path.split("/").pop()}/${obj.metadata?.name}`),
          () => {},
        ),
      ),
    );
    try {
      // A's churn: the shared name changes spec again and again (timed: "A alone"), new names appear.
      for (let i = 1; i <= 15; i++) {
        const t0 = performance.now();
        await patch(sides.a, "same", `A ${i}`);
        await waitFor(`A at ${i}`, () => converged(sides.a, "same", `A ${i}`), 30_000);
        aAloneMs.push(performance.now() - t0);
      }
      await Promise.all(Array.from({ length: 5 }, (_, i) => create(sides.a, `only-a-${i}`, `only A ${i}`)));
      await waitFor("A's new objects converged", async () => (await listReady(sides.a, "only-a-")).size === 5, 60_000);
      // Every message handled, then a fence written in B: the watch delivers in order, so any
      // write A's work made in B would be seen before it (a positive signal, not a pause).
      await atRest();
      await sides.b.core.createNamespacedConfigMap({ namespace: NS, body: { metadata: { name: "fence" } } });
      await waitFor("the fence seen", () => seen.includes("ADDED configmaps/fence"), 30_000);
    } finally {
      for (const w of watches) w.abort();
    }
    assert.deepEqual(seen, ["ADDED configmaps/fence"], "no write reached B while A churned");
    assert.deepEqual(
      { cr: (await get(sides.b, "same"))?.metadata?.resourceVersion, cm: (await configMap(sides.b, "same"))?.metadata?.resourceVersion },
      before,
    );
    assert.equal((await configMap(sides.b, "same"))?.data?.message, "from B");
    assert.equal(await configMap(sides.b, "only-a-0"), undefined);
    console.log(`# A alone (B up, idle): change → converged p50 ${p50(aAloneMs).toFixed(0)} ms over ${aAloneMs.length}`);
  });

  it("a forged event naming cluster c is dead-lettered with one log line, never reconciled against another cluster", { timeout: 120_000 }, async () => {
    const rvs = async () => [(await get(sides.a, "same"))?.metadata?.resourceVersion, (await get(sides.b, "same"))?.metadata?.resourceVersion];
    const untouched = await rvs();
    const a = await get(sides.a, "same");
    const forged: KeyEvent = {
      v: 1,
      cluster: "c",
      group: op.resource.group,
      version: op.resource.version,
      plural: op.resource.plural,
      kind: op.resource.kind,
      namespace: NS,
      name: "same",
      uid: a?.metadata?.uid ?? "u",
      resourceVersion: "999999",
      generation: 99,
      type: "MODIFIED",
      reason: "watch",
      observedAt: new Date().toISOString(),
    };
    await sqs.send(
      new SendMessageCommand({
        QueueUrl: queues().fifo,
        MessageBody: encodeKeyEvent(signedAs("a", forged)),
        MessageGroupId: messageGroupId(forged),
        MessageDeduplicationId: deduplicationId(forged, "forged"),
      }),
    );
    let dead: string[] = [];
    await waitFor(
      "the forged event in the dead-letter queue",
      async () => {
        const out = await sqs.send(
          new ReceiveMessageCommand({ QueueUrl: queues().fifoDlq, MaxNumberOfMessages: 10, WaitTimeSeconds: 1, VisibilityTimeout: 1 }),
        );
        dead = [...dead, ...(out.Messages ?? []).map((m) => m.Body ?? "")];
        return dead.some((body) => body.includes('"cluster":"c"'));
      },
      60_000,
    );
    const lines = logs.filter((l) => l.cluster === "c");
    assert.equal(lines.length, 1, "one log line for the forged cluster");
    assert.match(String(lines[0]?.msg), /cluster "c", which is not in the registry/);
    assert.deepEqual(await rvs(), untouched, "neither cluster's object was written");
  });

  it(
    "cluster A's key cannot sign for cluster B: a compromised bridge A's event about B's object is dead-lettered, B untouched",
    { timeout: 120_000 },
    async () => {
      const b = await get(sides.b, "same");
      const before = { cr: b?.metadata?.resourceVersion, cm: (await configMap(sides.b, "same"))?.metadata?.resourceVersion };
      const forged = signedAs("a", {
        v: 2,
        cluster: "b",
        group: op.resource.group,
        version: op.resource.version,
        plural: op.resource.plural,
        kind: op.resource.kind,
        namespace: NS,
        name: "same",
        uid: b?.metadata?.uid ?? "",
        resourceVersion: b?.metadata?.resourceVersion ?? "",
        generation: b?.metadata?.generation ?? 1,
        type: "MODIFIED",
        reason: "watch",
        observedAt: new Date().toISOString(),
        object: {
          ...(b as Record<string, unknown>),
          metadata: {
            ...(b?.metadata as Record<string, unknown>),
            name: "same",
            uid: b?.metadata?.uid ?? "",
            resourceVersion: b?.metadata?.resourceVersion ?? "",
          },
          spec: { message: "FORGED-BY-BRIDGE-A" },
        },
      });
      await sqs.send(
        new SendMessageCommand({
          QueueUrl: queues().fifo,
          MessageBody: encodeKeyEvent(forged),
          MessageGroupId: messageGroupId(forged),
          MessageDeduplicationId: deduplicationId(forged, "forged-by-a"),
        }),
      );
      let dead: string[] = [];
      await waitFor(
        "the event signed with A's key in the dead-letter queue",
        async () => {
          const out = await sqs.send(
            new ReceiveMessageCommand({ QueueUrl: queues().fifoDlq, MaxNumberOfMessages: 10, WaitTimeSeconds: 1, VisibilityTimeout: 1 }),
          );
          dead = [...dead, ...(out.Messages ?? []).map((m) => m.Body ?? "")];
          return dead.some((body) => body.includes("FORGED-BY-BRIDGE-A"));
        },
        60_000,
      );
      const lines = logs.filter((l) => typeof l.msg === "string" && l.msg.includes("MAC does not verify"));
      assert.equal(lines.length, 1, "one log line");
      assert.match(
        String(lines[0]?.msg),
        /^key event for Greeting [^ ]+\/same of cluster "b" refused: MAC does not verify: key id "ka" is not one this function accepts for cluster "b"/,
      );
      assert.deepEqual(
        { cr: (await get(sides.b, "same"))?.metadata?.resourceVersion, cm: (await configMap(sides.b, "same"))?.metadata?.resourceVersion },
        before,
        "nothing of B's was written",
      );
      assert.equal((await configMap(sides.b, "same"))?.data?.message, "from B");
    },
  );

  it("throughput and p50 on one host: one cluster vs two", { timeout: 240_000 }, async () => {
    const N = 20;
    const run = async (who: Side[], prefix: string) => {
      const created = new Map<string, number>();
      const readyAt = new Map<string, number>();
      const t0 = Date.now();
      await Promise.all(
        who.flatMap((s) =>
          Array.from({ length: N }, async (_, i) => {
            await create(s, `${prefix}-${i}`, `${prefix} ${s.id} ${i}`);
            created.set(`${s.id}/${prefix}-${i}`, Date.now());
          }),
        ),
      );
      await waitFor(
        `${prefix} all Ready`,
        async () => {
          for (const s of who)
            for (const name of await listReady(s, `${prefix}-`)) if (!readyAt.has(`${s.id}/${name}`)) readyAt.set(`${s.id}/${name}`, Date.now());
          return readyAt.size === who.length * N;
        },
        180_000,
      );
      const seconds = (Math.max(...readyAt.values()) - t0) / 1000;
      const latencies = [...readyAt].map(([k, at]) => at - (created.get(k) ?? t0));
      return { objects: who.length * N, seconds, perSecond: (who.length * N) / seconds, p50: p50(latencies) };
    };
    const one = await run([sides.a], "tp1");
    const two = await run([sides.a, sides.b], "tp2");
    const fmt = (r: typeof one) => `${r.objects} objects in ${r.seconds.toFixed(1)} s = ${r.perSecond.toFixed(1)}/s, create → Ready p50 ${r.p50} ms`;
    console.log(`# one cluster:  ${fmt(one)}`);
    console.log(`# two clusters: ${fmt(two)}`);
    assert.ok(two.perSecond > 0 && one.perSecond > 0);
  });

  it("cluster B's API server down does not slow cluster A's reconciles", { timeout: 240_000 }, async () => {
    // Events for B keep arriving (as its bridge queued them just before the outage: a backlog
    // across 10 objects), each failing against B's dead API server while A's changes flow.
    const withBEvents = async (label: string): Promise<{ ms: number[]; since: number; published: number }> => {
      let flooding = true;
      let published = 0;
      const flood = (async () => {
        while (flooding) {
          await Promise.all(
            Array.from({ length: 10 }, (_, i) => {
              const e: KeyEvent = {
                v: 1,
                cluster: "b",
                group: op.resource.group,
                version: op.resource.version,
                plural: op.resource.plural,
                kind: op.resource.kind,
                namespace: NS,
                name: `b-obj-${i}`,
                uid: `uid-b-${i}`,
                resourceVersion: String(published + i),
                generation: 1,
                type: "MODIFIED",
                reason: "watch",
                observedAt: new Date().toISOString(),
              };
              return sqs.send(
                new SendMessageCommand({
                  QueueUrl: queues().fifo,
                  MessageBody: encodeKeyEvent(signedAs("b", e)),
                  MessageGroupId: messageGroupId(e),
                  MessageDeduplicationId: deduplicationId(e, label),
                }),
              );
            }),
          );
          published += 10;
          await sleep(500);
        }
      })();
      const ms: number[] = [];
      const since = Date.now();
      try {
        await sleep(1000);
        for (let i = 1; i <= 15; i++) {
          const t0 = performance.now();
          await patch(sides.a, "same", `A ${label} ${i}`);
          await waitFor(`A at ${label} ${i}`, () => converged(sides.a, "same", `A ${label} ${i}`), 30_000);
          ms.push(performance.now() - t0);
        }
      } finally {
        flooding = false;
        await flood;
      }
      return { ms, since, published };
    };
    const handleP50 = (cluster: string, from: number, to = Date.now()) =>
      p50(handled.filter((h) => h.cluster === cluster && h.at >= from && h.at < to).map((h) => h.ms));

    // Control: the same stream of B events while B is up (they read objects that do not exist).
    const busy = await withBEvents("busy");
    const busyEnd = Date.now();
    await sides.b.cluster.apiServer.stop();
    const down = await withBEvents("down");
    const bFailures = handled.filter((h) => h.cluster === "b" && h.at >= down.since).length;
    const aloneP50 = p50(aAloneMs);
    const [busyP50, downP50] = [p50(busy.ms), p50(down.ms)];
    console.log(`# A alone (B idle):      change → converged p50 ${aloneP50.toFixed(0)} ms`);
    console.log(
      `# A with B busy (up):    p50 ${busyP50.toFixed(0)} ms (×${(busyP50 / aloneP50).toFixed(2)}), ${busy.published} B events; A handle() p50 ${handleP50("a", busy.since, busyEnd).toFixed(1)} ms, B ${handleP50("b", busy.since, busyEnd).toFixed(1)} ms`,
    );
    console.log(
      `# A with B down:         p50 ${downP50.toFixed(0)} ms (×${(downP50 / aloneP50).toFixed(2)} alone, ×${(downP50 / busyP50).toFixed(2)} busy), ${down.published} B events, ${bFailures} B handlings against the dead API server; A handle() p50 ${handleP50("a", down.since).toFixed(1)} ms, B ${handleP50("b", down.since).toFixed(1)} ms`,
    );
    assert.ok(bFailures > 0, "B's events really were attempted against its dead API server");
    // What keeps A fast is that each cluster has its own circuit: B's opened, A's never did, so
    // no A message was deferred (a shared circuit would defer each for 2.4–3.6 s).
    const circuitOpened = logs.filter((l) => String(l.msg).startsWith("API server unavailable; circuit open")).map((l) => l.cluster);
    assert.ok(circuitOpened.includes("b"), "B's circuit opened");
    assert.ok(!circuitOpened.includes("a"), "A's circuit never opened");
    // Speed itself (the 1.5× target above) is a measurement, printed here; the bound only catches
    // A waiting on B (a deferral adds ≥ 2.4 s per change), with room for a machine loaded to 4×
    // its cores (both runs are measured back to back, under the same load).
    assert.ok(downP50 <= busyP50 * 2 + 1000, `A's p50 ${downP50.toFixed(0)} ms with B down vs ${busyP50.toFixed(0)} ms with B busy`);
  });
});
