// The whole flow with the real bridge: kube-apiserver → bridge → ElasticMQ → local functions
// (both example operators sharing one queue, built from the environment as `crdfn dev` does).
// No test code publishes anything: every reconcile here is triggered by the bridge.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { BatchV1Api } from "@kubernetes/client-node";
import type { RunningBridge } from "../bridge/bridge.ts";
import type { Operator } from "../core/operator.ts";
import { startLocalFunctions } from "../functions/adapters/local.ts";
import type { Poller } from "../functions/adapters/poller.ts";
import cronTab, { cronJobName, REGISTRY } from "../examples/crontab/operator.ts";
import greeting, { configMapName } from "../examples/greeting/operator.ts";
import { settled } from "./support/settled.ts";
import { CLUSTER, crApi, ready, startEnv, startTestBridge, waitFor, type Env } from "./support/functions-environment.ts";

const op = cronTab as Operator<unknown>;
const greetingOp = greeting as Operator<unknown>;

describe("CronTab through the bridge", { timeout: 180_000 }, () => {
  let env: Env;
  let bridge: RunningBridge;
  let poller: Poller;
  let batch: BatchV1Api;
  const crs = () => crApi(env, op);
  const cronJob = async (name: string) => {
    try {
      return await batch.readNamespacedCronJob({ name: cronJobName(name), namespace: env.cluster.namespace });
    } catch {
      return undefined;
    }
  };
  const registry = async () => {
    try {
      return (await env.core.readNamespacedConfigMap({ name: REGISTRY, namespace: env.cluster.namespace })).data ?? {};
    } catch {
      return {};
    }
  };

  before(async () => {
    env = await startEnv([op, greetingOp], { file: import.meta.filename });
    batch = env.cluster.kubeConfig.makeApiClient(BatchV1Api);
    bridge = await startTestBridge(env, "stable.example.com/v1/crontabs>batch/v1/cronjobs, example.com/v1/greetings>v1/configmaps");
    poller = startLocalFunctions([greeting, cronTab], {
      env: { ...env.cluster.env, CRDFN_CLUSTER: CLUSTER, LOG_LEVEL: "silent" },
      registry: env.registry,
      waitTimeSeconds: 1,
      visibilityTimeout: 5,
    });
  });
  after(async () => {
    await poller?.stop();
    await bridge?.stop();
    await env?.cluster.stop();
  });

  it("create, update, child drift and delete are all driven by the bridge's events", { timeout: 120_000 }, async () => {
    // Schedules that fire only on 29 February: a firing's status write on the CronJob would be news
    // to the CronTab, one reconcile more than the count below allows.
    await crs().create("bridged", { cronSpec: "0 3 29 2 *", image: "busybox:1.36", replicas: 2 });
    await waitFor("Ready=True", async () => ready(await crs().get("bridged"))?.status === "True");
    assert.equal((await cronJob("bridged"))?.spec?.schedule, "0 3 29 2 *");
    assert.equal((await registry()).bridged, "0 3 29 2 *");
    // Our own status write must not start a reconcile loop through the bridge.
    const handled = async () => {
      const counter = (await env.registry.getSingleMetric("controller_runtime_reconcile_total")?.get())?.values ?? [];
      return counter.filter((v) => v.labels.controller === "crontab").reduce((n, v) => n + v.value, 0);
    };
    // At rest once converged: nothing queued, nothing to publish, nothing scheduled (waited for,
    // not slept). Announced once more, a converged CronTab is reconciled once and writes nothing.
    const pipeline = { sqs: env.sqs, queueUrl: env.cluster.sqs.queues.fifo, bridge };
    await settled(pipeline);
    const atRest = await handled();
    const rv = (await crs().get("bridged"))?.metadata?.resourceVersion;
    console.log(`# reconciles for one creation through the bridge: ${atRest}`);
    assert.equal(await bridge.resync({ group: op.resource.group, plural: op.resource.plural, namespace: env.cluster.namespace, name: "bridged" }), 1);
    await waitFor("the announcement reconciled", async () => (await handled()) > atRest);
    await settled(pipeline);
    // The announcement's reconcile, and at most one late echo of the creation still on its way.
    assert.ok((await handled()) <= atRest + 2, `quiet once converged: ${(await handled()) - atRest} reconciles for one announcement`);
    assert.equal((await crs().get("bridged"))?.metadata?.resourceVersion, rv, "the reconcile at rest wrote nothing");

    await crs().patchSpec("bridged", { cronSpec: "0 4 29 2 *", image: "busybox:1.37", replicas: 2 });
    await waitFor("CronJob follows the spec", async () => (await cronJob("bridged"))?.spec?.schedule === "0 4 29 2 *");
    await waitFor("observedGeneration 2", async () => (await crs().get("bridged"))?.status?.observedGeneration === 2);

    // Someone deletes the owned CronJob: the bridge announces the parent, the function recreates it.
    const oldUid = (await cronJob("bridged"))?.metadata?.uid;
    await batch.deleteNamespacedCronJob({ name: cronJobName("bridged"), namespace: env.cluster.namespace });
    await waitFor("CronJob recreated", async () => {
      const job = await cronJob("bridged");
      return job !== undefined && job.metadata?.uid !== oldUid;
    });

    // The other operator on the same queue is served too.
    await crApi(env, greetingOp).create("shared-queue", { message: "routed" });
    await waitFor("Greeting reconciled", async () => ready(await crApi(env, greetingOp).get("shared-queue"))?.status === "True");
    assert.equal((await env.core.readNamespacedConfigMap({ name: configMapName("shared-queue"), namespace: env.cluster.namespace })).data?.message, "routed");

    await crs().delete("bridged");
    await waitFor("CronTab gone", async () => (await crs().get("bridged")) === undefined);
    assert.equal((await registry()).bridged, undefined, "the finalizer withdrew the registry entry");
  });
});
