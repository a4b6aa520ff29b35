// The reconcile contract end to end: real kube-apiserver + kube-controller-manager
// + ElasticMQ + the real bridge + the local functions. Every reconcile is triggered by the bridge.
import { signedForTest } from "./support/event-key.ts";
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { AppsV1Api, EventsV1Api } from "@kubernetes/client-node";
import { z } from "zod";
import type { RunningBridge } from "../bridge/bridge.ts";
import { defineOperator, type Operator, type ReconcileResult } from "../core/operator.ts";
import { startLocalFunctions } from "../functions/adapters/local.ts";
import type { Poller } from "../functions/adapters/poller.ts";
import greeting from "../examples/greeting/operator.ts";
import { settled } from "./support/settled.ts";
import { announcedEvent, CLUSTER, crApi, ready, runtimeFor, startEnv, startTestBridge, waitFor, type Env } from "./support/functions-environment.ts";
import { handleMessage } from "../functions/runtime/runtime.ts";

/** An App owns a Deployment it observes; its status reports what kube-controller-manager wrote. */
const app = defineOperator({
  resource: { group: "contract.example.com", version: "v1", plural: "apps", kind: "App" },
  spec: z.object({ replicas: z.number().int().min(0).max(5) }),
  status: z.object({ replicas: z.number().int().min(0) }),
  owns: [{ group: "apps", version: "v1", kind: "Deployment", observe: true }],
  reconcile(o, ctx) {
    const deployment = ctx.children.of<{ status?: { replicas?: number } }>("Deployment")[o.metadata.name];
    const labels = { app: o.metadata.name };
    return {
      children: [
        {
          apiVersion: "apps/v1",
          kind: "Deployment",
          metadata: { name: o.metadata.name },
          spec: {
            replicas: o.spec.replicas,
            selector: { matchLabels: labels },
            template: { metadata: { labels }, spec: { containers: [{ name: "main", image: "registry.invalid/app:1" }] } },
          },
        },
      ],
      status: { replicas: deployment?.status?.replicas ?? 0 },
    };
  },
});

/** A Bundle owns one ConfigMap per name in its spec: the dropped ones are pruned. */
const bundle = defineOperator({
  resource: { group: "contract.example.com", version: "v1", plural: "bundles", kind: "Bundle" },
  spec: z.object({ names: z.array(z.string()) }),
  owns: [{ group: "", version: "v1", kind: "ConfigMap" }],
  reconcile: (o) => ({
    children: o.spec.names.map((n) => ({ apiVersion: "v1", kind: "ConfigMap", metadata: { name: `${o.metadata.name}-${n}` }, data: { n } })),
  }),
});

/** A Misfit does, on request, each thing the runtime must refuse or report. */
const misfit = defineOperator({
  resource: { group: "contract.example.com", version: "v1", plural: "misfits", kind: "Misfit" },
  spec: z.object({ mode: z.enum(["ok", "throw", "async", "elsewhere", "badstatus"]) }),
  status: z.object({ count: z.number().int() }),
  owns: [{ group: "", version: "v1", kind: "ConfigMap" }],
  reconcile(o): ReconcileResult<{ count: number }> {
    const child = { apiVersion: "v1", kind: "ConfigMap", metadata: { name: `${o.metadata.name}-misfit` }, data: {} };
    switch (o.spec.mode) {
      case "throw":
        throw new Error(`kaboom in ${o.metadata.name}`);
      case "async":
        return Promise.resolve({ children: [child] }) as unknown as ReconcileResult<{ count: number }>;
      case "elsewhere":
        return { children: [{ ...child, metadata: { ...child.metadata, namespace: "kube-public" } }] };
      case "badstatus":
        return { status: { count: "many" as unknown as number } };
      default:
        return { children: [child], status: { count: 1 } };
    }
  },
});

const operators = [app, bundle, misfit, greeting] as ReadonlyArray<Operator<unknown>>;

describe("the reconcile contract, end to end", { timeout: 300_000 }, () => {
  let env: Env;
  let bridge: RunningBridge;
  let poller: Poller;
  let apps: AppsV1Api;
  let events: EventsV1Api;
  const configMap = async (name: string) => {
    try {
      return await env.core.readNamespacedConfigMap({ name, namespace: env.cluster.namespace });
    } catch {
      return undefined;
    }
  };
  const handled = async (kind: string) => {
    const counter = (await env.registry.getSingleMetric("controller_runtime_reconcile_total")?.get())?.values ?? [];
    return counter.filter((v) => v.labels.controller === kind.toLowerCase()).reduce((n, v) => n + v.value, 0);
  };
  const eventsAbout = async (name: string) =>
    (await events.listNamespacedEvent({ namespace: env.cluster.namespace })).items.filter((e) => e.regarding?.name === name);

  before(async () => {
    env = await startEnv(operators, { file: import.meta.filename });
    apps = env.cluster.kubeConfig.makeApiClient(AppsV1Api);
    events = env.cluster.kubeConfig.makeApiClient(EventsV1Api);
    bridge = await startTestBridge(
      env,
      "contract.example.com/v1/apps>apps/v1/deployments, contract.example.com/v1/bundles>v1/configmaps, contract.example.com/v1/misfits>v1/configmaps, example.com/v1/greetings>v1/configmaps",
    );
    // Each operator's function as deployed: its own identity, under its admission policy.
    poller = startLocalFunctions(operators, {
      env: { ...env.cluster.env, CRDFN_CLUSTER: CLUSTER, LOG_LEVEL: "silent" },
      envOf: (op) => ({ KUBECONFIG: undefined, ...env.identities?.functionEnv(op) }),
      registry: env.registry,
      waitTimeSeconds: 1,
      visibilityTimeout: 2,
    });
  });
  after(async () => {
    await poller?.stop();
    await bridge?.stop();
    await env?.cluster.stop();
  });

  it(
    "an App reports the Deployment's status.replicas written by kube-controller-manager, then stays at rest: announced again, it writes nothing",
    { timeout: 150_000 },
    async () => {
      const crs = crApi(env, app);
      await crs.create("web", { replicas: 2 });
      await waitFor("status.replicas 2", async () => (await crs.get("web"))?.status?.replicas === 2, 60_000);
      assert.equal((await apps.readNamespacedDeployment({ name: "web", namespace: env.cluster.namespace })).status?.replicas, 2);
      assert.equal(ready(await crs.get("web"))?.status, "True");
      const managed =
        ((await crs.get("web")) as { metadata?: { managedFields?: Array<{ manager?: string; subresource?: string }> } } | undefined)?.metadata?.managedFields ??
        [];
      assert.ok(
        managed.some((m) => m.manager === "crdfn" && m.subresource === "status"),
        "status written under the field manager crdfn",
      );
      // At rest: nothing queued, nothing to publish, nothing scheduled. Then one more announcement:
      // a reconcile loop is a reconcile of the converged object that writes, so this one must not.
      const pipeline = { sqs: env.sqs, queueUrl: env.cluster.sqs.queues.fifo, bridge };
      await settled(pipeline);
      const atRest = await handled("App");
      const rv = (await crs.get("web"))?.metadata?.resourceVersion;
      assert.equal(await bridge.resync({ group: app.resource.group, plural: app.resource.plural, namespace: env.cluster.namespace, name: "web" }), 1);
      await waitFor("the announcement reconciled", async () => (await handled("App")) > atRest);
      await settled(pipeline);
      const more = (await handled("App")) - atRest;
      console.log(`# App reconciles from rest to rest again around one announcement: ${more} (${atRest} to converge)`);
      assert.ok(more <= 3, `no reconcile loop: ${more} reconciles for one announcement`);
      assert.equal((await crs.get("web"))?.metadata?.resourceVersion, rv, "nothing written at rest");

      // API calls of a steady reconcile with an observed child, on the event the bridge would send:
      // the Deployment read by name, nothing written.
      const steady = await handleMessage(runtimeFor(env, app), {
        id: "steady-app",
        body: JSON.stringify(signedForTest(await announcedEvent(env, app, (await crs.get("web")) ?? {}))),
      });
      console.log(`# steady reconcile with an observed Deployment: ${steady.apiCalls} API calls`);
      assert.equal(steady.apiCalls, 1);
    },
  );

  it("pruning removes a dropped child and never an object it did not create", { timeout: 60_000 }, async () => {
    const crs = crApi(env, bundle);
    await crs.create("kit", { names: ["a", "b"] });
    await waitFor("both children", async () => (await configMap("kit-a")) !== undefined && (await configMap("kit-b")) !== undefined);
    const uid = (await crs.get("kit"))?.metadata?.uid ?? "";
    // Not ours, though it carries our label: no controller owner reference to the Bundle.
    await env.core.createNamespacedConfigMap({
      namespace: env.cluster.namespace,
      body: { metadata: { name: "kit-forged", labels: { "crdfn.io/parent-uid": uid } }, data: { keep: "me" } },
    });
    await crs.patchSpec("kit", { names: ["a"] });
    await waitFor("kit-b pruned", async () => (await configMap("kit-b")) === undefined);
    assert.ok(await configMap("kit-a"));
    assert.equal((await configMap("kit-forged"))?.data?.keep, "me");

    // Steady state without observed children: the event carries the object and the children's
    // keys, and their applied hashes say nothing changed: no request at all.
    const steady = await handleMessage(runtimeFor(env, bundle), {
      id: "steady-kit",
      body: JSON.stringify(signedForTest(await announcedEvent(env, bundle, (await crs.get("kit")) ?? {}))),
    });
    console.log(`# steady reconcile, one pruned kind, no observed children: ${steady.apiCalls} API calls`);
    assert.equal(steady.apiCalls, 0);
  });

  it("a status that fails the status schema → Ready=False InvalidStatus, nothing written to status fields", { timeout: 30_000 }, async () => {
    const crs = crApi(env, misfit);
    await crs.create("bad-status", { mode: "badstatus" });
    await waitFor("InvalidStatus", async () => ready(await crs.get("bad-status"))?.reason === "InvalidStatus");
    assert.match(ready(await crs.get("bad-status"))?.message ?? "", /count/);
    assert.equal((await crs.get("bad-status"))?.status?.count, undefined);
  });

  it("a throw → Ready=False ReconcileError and ONE Event counting the retries", { timeout: 60_000 }, async () => {
    const crs = crApi(env, misfit);
    await crs.create("thrower", { mode: "throw" });
    await waitFor("ReconcileError", async () => ready(await crs.get("thrower"))?.reason === "ReconcileError");
    assert.equal(ready(await crs.get("thrower"))?.message, "kaboom in thrower");
    await waitFor("a retry counted on the same Event", async () => ((await eventsAbout("thrower"))[0]?.series?.count ?? 0) >= 2, 30_000);
    const recorded = await eventsAbout("thrower");
    assert.equal(recorded.length, 1);
    assert.equal(recorded[0]?.reason, "ReconcileError");
  });

  it("an async reconcile and a child in another namespace are refused, each with a condition and an Event", { timeout: 30_000 }, async () => {
    const crs = crApi(env, misfit);
    await crs.create("promiser", { mode: "async" });
    await crs.create("wanderer", { mode: "elsewhere" });
    await waitFor("AsyncReconcile", async () => ready(await crs.get("promiser"))?.reason === "AsyncReconcile");
    await waitFor("ChildInOtherNamespace", async () => ready(await crs.get("wanderer"))?.reason === "ChildInOtherNamespace");
    assert.equal(await configMap("promiser-misfit"), undefined);
    assert.deepEqual(
      (await eventsAbout("wanderer")).map((e) => e.reason),
      ["ChildInOtherNamespace"],
    );
    assert.deepEqual(
      (await eventsAbout("promiser")).map((e) => e.reason),
      ["AsyncReconcile"],
    );
  });

  it("take-over: an unrelated ConfigMap victim-greeting stays untouched and the Greeting shows ChildConflict", { timeout: 30_000 }, async () => {
    await env.core.createNamespacedConfigMap({ namespace: env.cluster.namespace, body: { metadata: { name: "victim-greeting" }, data: { precious: "yes" } } });
    const crs = crApi(env, greeting);
    await crs.create("victim", { message: "mine now" });
    await waitFor("ChildConflict", async () => ready(await crs.get("victim"))?.reason === "ChildConflict");
    assert.match(ready(await crs.get("victim"))?.message ?? "", new RegExp(`ConfigMap ${env.cluster.namespace}/victim-greeting`));
    const victim = await configMap("victim-greeting");
    assert.deepEqual(victim?.data, { precious: "yes" });
    assert.equal(victim?.metadata?.ownerReferences, undefined);
    assert.deepEqual(
      (await eventsAbout("victim")).map((e) => e.reason),
      ["ChildConflict"],
    );
  });
});
