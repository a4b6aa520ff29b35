// The Cloud Run path in dev counts deliveries as Pub/Sub does: the first push of a message carries
// deliveryAttempt 1, the n-th n (pstest v2.6.0 counts a delivery when a pull hands the message
// out, before setting deliveryAttempt; the deliverer's modifyAckDeadline before its POST counts
// nothing). So what a first delivery may do is done there as on a deployed Cloud Run function:
// a forged event is refused with one line (later deliveries say so at debug level), and in a
// burst of spec changes every first delivery reconciles the body its event carries instead of
// reading the parent (most of those bodies are stale by then: the fence refuses their child
// writes, and the function reads the parent and recomputes), never stepping the child back. The bridge publishes to the Pub/Sub emulator; the local
// push deliverer POSTs to a functions-framework server (cli/local/cloud-run.ts), whose runtime
// runs as the operator's identity and logs where the test reads it.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { v1 } from "@google-cloud/pubsub";
import { Watch } from "@kubernetes/client-node";
import { z } from "zod";
import { startBridge, type RunningBridge } from "../bridge/bridge.ts";
import { loadBridgeConfig } from "../bridge/config.ts";
import { pubSubPublisher, pubSubTransport } from "../bridge/pubsub-transport.ts";
import { startLocalCloudRun, type LocalCloudRun } from "../cli/local/cloud-run.ts";
import { pubSubClient } from "../clients/pubsub-client.ts";
import { encodeKeyEvent, messageGroupId, PARENT_UID_LABEL, type KeyEvent } from "../core/event.ts";
import { defineOperator, type Operator } from "../core/operator.ts";
import { operatorName } from "../deploy/rbac.ts";
import { startLocalPubSub, type LocalPubSub } from "../emulator/pubsub.ts";
import type { PushRecord } from "../emulator/pubsub-push.ts";
import type { KubeApi } from "../functions/runtime/kube-api.ts";
import { createKubeApi } from "../functions/runtime/kube-api-http.ts";
import { TEST_EVENT_KEY } from "./support/event-key.ts";
import { CLUSTER, crApi, ready, runtimeFor, startEnv, waitFor, type Cr, type Env } from "./support/functions-environment.ts";
import { OverlapRecorder } from "./support/overlaps.ts";

const GROUP = "attempts.crdfn.dev";
const PLURAL = "pushcounts";
const op = defineOperator({
  resource: { group: GROUP, version: "v1", plural: PLURAL, kind: "PushCount" },
  spec: z.object({ value: z.number().int().nonnegative() }),
  owns: [{ group: "", version: "v1", kind: "ConfigMap" }],
  reconcile: (p) => ({
    children: [{ apiVersion: "v1", kind: "ConfigMap", metadata: { name: `${p.metadata.name}-out` }, data: { value: String(p.spec.value) } }],
  }),
}) as Operator<unknown>;
const ROUNDS = 5;
const PER_ROUND = 10;

/**
 * The function's API client, counting its reads of each parent by name: all of them, and those
 * made instead of a carried body (a first attempt's read, runtime.ts firstRead).
 */
function countingReads(api: KubeApi): { api: KubeApi; parentReads: Map<string, number>; standIns: Map<string, number> } {
  const parentReads = new Map<string, number>();
  const standIns = new Map<string, number>();
  return {
    parentReads,
    standIns,
    api: {
      ...api,
      get: (ref, read) => {
        if (ref.plural === PLURAL && ref.name) {
          parentReads.set(ref.name, (parentReads.get(ref.name) ?? 0) + 1);
          // The read that stands in for a carried body is the only one asked "not older than" the event.
          if (read?.notOlderThan !== undefined) standIns.set(ref.name, (standIns.get(ref.name) ?? 0) + 1);
        }
        return api.get(ref, read);
      },
    },
  };
}

describe("Cloud Run path in dev: delivery attempts as Pub/Sub counts them", { timeout: 600_000 }, () => {
  let env: Env;
  let pubsub: LocalPubSub;
  let cloudRun: LocalCloudRun;
  let bridge: RunningBridge;
  let reads: ReturnType<typeof countingReads>;
  const recorder = new OverlapRecorder();
  const pushes: PushRecord[] = [];
  const readsPerDelivery: Array<{ name: string; generation: number | undefined; receiveCount: number | undefined; reads: number; standIns: number }> = [];
  const names = () => cloudRun.names.get(operatorName(op))!;

  before(async () => {
    [env, pubsub] = await Promise.all([startEnv([op], { file: import.meta.filename }), startLocalPubSub({ log: () => {} })]);
    reads = countingReads(env.identities ? createKubeApi({ connection: env.identities.functionConnection(op) }) : env.api);
    const counted = runtimeFor(env, op, { api: reads.api });
    // Reconciles of one object run one at a time: the reads during one are its own.
    const runtime = recorder.wrap({
      ...counted,
      handle: async (delivery) => {
        const name = delivery.ok ? delivery.event.name : "";
        const before = reads.parentReads.get(name) ?? 0;
        const standInsBefore = reads.standIns.get(name) ?? 0;
        const outcome = await counted.handle(delivery);
        if (delivery.ok)
          readsPerDelivery.push({
            name,
            generation: delivery.event.generation,
            receiveCount: delivery.message.receiveCount,
            reads: (reads.parentReads.get(name) ?? 0) - before,
            standIns: (reads.standIns.get(name) ?? 0) - standInsBefore,
          });
        return outcome;
      },
    });
    cloudRun = await startLocalCloudRun({ pubsub, operators: [op], runtimeOf: () => runtime, logger: env.logger, onPush: (p) => pushes.push(p) });
    // The real bridge, as startTestBridge starts it, publishing to the operator's topic.
    const config = loadBridgeConfig({
      CRDFN_CLUSTER: CLUSTER,
      CRDFN_PUBSUB_TOPIC: names().topic,
      PUBSUB_EMULATOR_HOST: pubsub.host,
      CRDFN_RESOURCES: `${GROUP}/v1/${PLURAL}>v1/configmaps`,
      ...(env.cluster.shared ? { CRDFN_NAMESPACES: env.cluster.namespaces.join(",") } : {}),
      CRDFN_RESYNC_SECONDS: "0",
      CRDFN_HTTP_PORT: "0",
    });
    const transport = pubSubTransport(pubSubPublisher({ apiEndpoint: pubsub.host }));
    bridge = startBridge(config, {
      eventKey: TEST_EVENT_KEY,
      kubeConfig: env.cluster.kubeConfig,
      transport,
      logger: env.logger.child({ component: "bridge" }),
    });
    await bridge.ready;
  });
  after(async () => {
    await bridge?.stop(1000);
    await cloudRun?.stop();
    await pubsub?.stop();
    await env?.cluster.stop();
  });

  const converged = async (name: string, value: number): Promise<boolean> => {
    const cr: Cr | undefined = await crApi(env, op).get(name);
    if (cr?.spec?.value !== value || ready(cr)?.status !== "True" || cr.status?.observedGeneration !== cr.metadata?.generation) return false;
    const child = await env.core.readNamespacedConfigMap({ name: `${name}-out`, namespace: env.cluster.namespace }).catch(() => undefined);
    return child?.data?.value === String(value);
  };

  it("a forged event: its first push carries deliveryAttempt 1, its redeliveries 2 to 5; one refusal line, then the dead-letter topic", async () => {
    const crs = crApi(env, op);
    await crs.create("target", { value: 1 });
    await waitFor("created", () => converged("target", 1), 60_000);
    const target = (await crs.get("target"))!;
    const forged: KeyEvent = {
      v: 2,
      cluster: CLUSTER,
      group: GROUP,
      version: "v1",
      plural: PLURAL,
      kind: "PushCount",
      namespace: env.cluster.namespace,
      name: "target",
      uid: String(target.metadata?.uid),
      resourceVersion: String(target.metadata?.resourceVersion),
      generation: Number(target.metadata?.generation),
      type: "MODIFIED",
      observedAt: new Date().toISOString(),
      object: {
        ...target,
        metadata: { ...target.metadata, name: "target", uid: String(target.metadata?.uid), resourceVersion: String(target.metadata?.resourceVersion) },
        spec: { value: 999 },
      },
    };
    const from = pushes.length;
    const publisher = pubSubPublisher({ apiEndpoint: pubsub.host });
    try {
      const [sent] = await publisher.publish(names().topic, [{ body: encodeKeyEvent(forged), orderingKey: messageGroupId(forged) }]);
      assert.ok(sent?.ok, JSON.stringify(sent));
    } finally {
      await publisher.close();
    }
    const client = await pubSubClient({ projectId: pubsub.projectId, emulatorHost: pubsub.host });
    const subscriber = new v1.SubscriberClient({ ...(await client.getClientConfig()) });
    try {
      await waitFor(
        "the forged event dead-lettered",
        async () => {
          const [res] = await subscriber.pull({ subscription: names().deadLetterSubscription, maxMessages: 10, returnImmediately: true });
          const got = res.receivedMessages ?? [];
          if (got.length > 0) await subscriber.acknowledge({ subscription: names().deadLetterSubscription, ackIds: got.map((m) => m.ackId ?? "") });
          return got.some((m) =>
            Buffer.from(m.message?.data ?? "")
              .toString("utf8")
              .includes('"value":999'),
          );
        },
        120_000,
      );
    } finally {
      await subscriber.close();
      await client.close();
    }
    // The refusal names the object; its repeats at debug level name the message only.
    const forgedIds = new Set(
      env.logs.filter((l) => String(l.msg).includes("refused") && l.object === `PushCount ${env.cluster.namespace}/target`).map((l) => l.messageId),
    );
    const refusals = env.logs.filter((l) => String(l.msg).includes("refused") && forgedIds.has(l.messageId));
    const attempts = pushes.slice(from).map((p) => `${p.attempt}${p.acked ? "" : "✗"}`);
    console.log(
      `# forged event: pushes ${attempts.join(" ")}; refusal lines ${refusals.filter((l) => Number(l.level) >= 50).length} at error level, ${refusals.filter((l) => Number(l.level) < 30).length} at debug`,
    );
    assert.deepEqual(attempts, ["1✗", "2✗", "3✗", "4✗", "5✗"], "a first delivery is attempt 1, each redelivery one more");
    assert.equal(refusals.filter((l) => Number(l.level) >= 30).length, 1, "one refusal line");
    assert.equal(refusals.filter((l) => Number(l.level) >= 50).length, 1, "and it is an error");
    assert.equal(forgedIds.size, 1, "one message");
    assert.equal((await env.core.readNamespacedConfigMap({ name: "target-out", namespace: env.cluster.namespace })).data?.value, "1", "nothing was written");
  });

  it(`${ROUNDS} bursts of ${PER_ROUND} spec changes: every first delivery reconciles its carried body (no read in its stead), the fence refuses what is stale, the child never steps back`, async () => {
    const values: number[] = [];
    const watch = new Watch(env.cluster.kubeConfig);
    const list = await env.core.listNamespacedConfigMap({ namespace: env.cluster.namespace, labelSelector: PARENT_UID_LABEL });
    const request = await watch.watch(
      `/api/v1/namespaces/${env.cluster.namespace}/configmaps`,
      { resourceVersion: list.metadata?.resourceVersion, labelSelector: PARENT_UID_LABEL, fieldSelector: "metadata.name=burst-out" },
      (type: string, obj: { data?: Record<string, string> }) => {
        if ((type === "ADDED" || type === "MODIFIED") && obj.data?.value !== undefined) values.push(Number(obj.data.value));
      },
      () => {},
    );
    try {
      const crs = crApi(env, op);
      await crs.create("burst", { value: 0 });
      await waitFor("created", () => converged("burst", 0), 60_000);
      const from = readsPerDelivery.length;
      for (let r = 0; r < ROUNDS; r++) {
        for (let i = 1; i <= PER_ROUND; i++) await crs.patchSpec("burst", { value: r * PER_ROUND + i });
        await waitFor(`round ${r + 1} converged`, () => converged("burst", (r + 1) * PER_ROUND), 120_000);
      }
      const handled = readsPerDelivery.slice(from).filter((d) => d.name === "burst");
      const first = handled.filter((h) => h.receiveCount === 1);
      const carried = first.filter((h) => h.standIns === 0).length;
      const reread = first.filter((h) => h.standIns === 0 && h.reads > 0).length;
      const regressions = values.filter((v, i) => i > 0 && v < values[i - 1]!).length;
      console.log(
        `# burst: ${handled.length} deliveries handled, ${first.length} of them first deliveries, ${carried} of which reconciled their carried body instead of a read ` +
          `(${reread} then read the parent after the fence refused the stale body's child write or its status write met a newer object; reads per delivery ${handled.map((h) => `${h.reads}${h.receiveCount === 1 ? "" : `@${h.receiveCount}`}`).join(" ")}); ` +
          `${values.length} child writes, ${regressions} regressions, ${recorder.overlaps.length} overlaps`,
      );
      assert.ok(first.length > 0, "first deliveries are reported as such");
      assert.equal(carried, first.length, "every first delivery reconciled the body it carries");
      assert.equal(regressions, 0, `the child's values as written: ${values.join(", ")}`);
      assert.equal(values.at(-1), ROUNDS * PER_ROUND);
      assert.equal(recorder.overlaps.length, 0);
    } finally {
      request.abort();
    }
  });
});
