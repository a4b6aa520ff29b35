// CronTab end to end: an owned CronJob, a shared registry entry, scale subresource, and a
// finalizer whose cleanup is visible in the registry ConfigMap.
import { signedForTest } from "./support/event-key.ts";
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { BatchV1Api } from "@kubernetes/client-node";
import cronTab, { cronJobName, FINALIZER, REGISTRY } from "../examples/crontab/operator.ts";
import type { Operator } from "../core/operator.ts";
import type { Poller } from "../functions/adapters/poller.ts";
import { handleMessage, type Runtime } from "../functions/runtime/runtime.ts";
import { crApi, keyEventOf, pollerFor, publish, ready, runtimeFor, startEnv, waitFor, type Env } from "./support/functions-environment.ts";

const op = cronTab as Operator<unknown>;

describe("CronTab operator, end to end", { timeout: 180_000 }, () => {
  let env: Env;
  let runtime: Runtime;
  let poller: Poller;
  let batch: BatchV1Api;
  const crs = () => crApi(env, op);
  const announce = async (name: string, cause = "") => {
    const cr = await crs().get(name);
    if (cr) await publish(env, keyEventOf(op, cr), cause);
  };
  const cronJob = async (name: string) => {
    try {
      return await batch.readNamespacedCronJob({ name: cronJobName(name), namespace: env.cluster.namespace });
    } catch {
      return undefined;
    }
  };
  const registry = async (): Promise<Record<string, string>> => {
    try {
      return (await env.core.readNamespacedConfigMap({ name: REGISTRY, namespace: env.cluster.namespace })).data ?? {};
    } catch {
      return {};
    }
  };

  before(async () => {
    env = await startEnv([op], { file: import.meta.filename });
    batch = env.cluster.kubeConfig.makeApiClient(BatchV1Api);
    runtime = runtimeFor(env, op);
    poller = pollerFor(env, runtime);
  });
  after(async () => {
    await poller?.stop();
    await env?.cluster.stop();
  });

  it("create → finalizer, owned CronJob, registry entry, status replicas and Ready=True", { timeout: 60_000 }, async () => {
    await crs().create("nightly", { cronSpec: "0 3 * * *", image: "busybox:1.36", replicas: 2 });
    await crs().create("hourly", { cronSpec: "0 * * * *", image: "busybox:1.36" });
    await announce("nightly");
    await announce("hourly");
    await waitFor("both Ready", async () => ready(await crs().get("nightly"))?.status === "True" && ready(await crs().get("hourly"))?.status === "True");
    const cr = await crs().get("nightly");
    assert.deepEqual(cr?.metadata?.finalizers, [FINALIZER]);
    assert.equal(cr?.status?.replicas, 2);
    assert.equal(cr?.status?.observedGeneration, cr?.metadata?.generation);
    assert.equal((await crs().get("hourly"))?.status?.replicas, 1, "the CRD default (from zod's .default) applied");
    const job = await cronJob("nightly");
    assert.equal(job?.spec?.schedule, "0 3 * * *");
    assert.equal(job?.spec?.jobTemplate.spec?.parallelism, 2);
    assert.equal(job?.metadata?.ownerReferences?.[0]?.uid, cr?.metadata?.uid);
    assert.deepEqual(await registry(), { nightly: "0 3 * * *", hourly: "0 * * * *" });
  });

  it("measures API calls per reconcile: first creation and steady state", { timeout: 30_000 }, async () => {
    const fresh = await crs().create("counted", { cronSpec: "*/5 * * * *", image: "busybox:1.36" });
    const first = await handleMessage(runtime, { id: "first", body: JSON.stringify(signedForTest(keyEventOf(op, fresh))) });
    assert.equal(first.result, "success");
    const cr = await crs().get("nightly");
    const outcome = await handleMessage(runtime, { id: "steady", body: JSON.stringify(signedForTest(keyEventOf(op, cr ?? {}))) });
    console.log(`# CronTab API calls per reconcile: first creation ${first.apiCalls}, steady state ${outcome.apiCalls}`);
    assert.equal(outcome.result, "success");
    assert.ok(outcome.apiCalls <= 3, `steady state made ${outcome.apiCalls} calls`);
    assert.equal((await crs().get("nightly"))?.metadata?.resourceVersion, cr?.metadata?.resourceVersion);
  });

  it("update (through the scale subresource) → CronJob and status follow", { timeout: 60_000 }, async () => {
    await env.custom.patchNamespacedCustomObjectScale({
      group: op.resource.group,
      version: op.resource.version,
      plural: op.resource.plural,
      namespace: env.cluster.namespace,
      name: "nightly",
      body: [{ op: "replace", path: "/spec/replicas", value: 5 }],
    });
    await announce("nightly", "scaled");
    await waitFor("CronJob parallelism 5", async () => (await cronJob("nightly"))?.spec?.jobTemplate.spec?.parallelism === 5);
    await waitFor("status replicas 5", async () => (await crs().get("nightly"))?.status?.replicas === 5);
    const scale = (await env.custom.getNamespacedCustomObjectScale({
      group: op.resource.group,
      version: op.resource.version,
      plural: op.resource.plural,
      namespace: env.cluster.namespace,
      name: "nightly",
    })) as { spec?: { replicas?: number }; status?: { replicas?: number } };
    assert.equal(scale.spec?.replicas, 5);
    assert.equal(scale.status?.replicas, 5);
  });

  it("delete → the finalizer withdraws the registry entry, then the object is gone", { timeout: 120_000 }, async () => {
    const before = await crs().get("nightly");
    await crs().delete("nightly");
    // Held by the finalizer until a reconcile runs it.
    const deleting = await crs().get("nightly");
    assert.ok(deleting, "the finalizer holds the object");
    await announce("nightly", "deleting");
    await waitFor("CronTab gone", async () => (await crs().get("nightly")) === undefined);
    assert.deepEqual(await registry(), { hourly: "0 * * * *", counted: "*/5 * * * *" }, "only the other CronTabs' entries are left");
    assert.ok(before);
    await waitFor("CronJob garbage-collected", async () => (await cronJob("nightly")) === undefined, 90_000);
    assert.ok(await cronJob("hourly"), "the other CronTab's CronJob is untouched");
  });
});
