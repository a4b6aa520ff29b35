// Identity, not names, against a real API server with each function's generated identity and
// admission policy in force. A name holds one object at a time: an event written for an earlier
// object of the name (kept and re-sent after a delete and re-create, or a dead letter redriven)
// writes nothing to the live object's children, on the poller, the Lambda adapter behind a stand-in
// for its event source, and the Cloud Run path (Pub/Sub emulator, push, functions-framework); a
// watch opened before the re-send records every write of the child. With the function's own
// token, a fence cannot be lowered in two writes nor a child moved to another controller. A fence
// an admin raised past the live generation is reported on the object within one reconcile
// (Ready=False, FenceAhead) and `crdfn repair` mends it, while a watch of the object never sees
// Ready=True behind its generation after a write of the function. A backup applied back after
// everything was deleted reconciles to Ready, none wedged.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { SendMessageCommand } from "@aws-sdk/client-sqs";
import { Watch } from "@kubernetes/client-node";
import { pino } from "pino";
import { z } from "zod";
import type { RunningBridge } from "../bridge/bridge.ts";
import { pubSubPublisher } from "../bridge/pubsub-transport.ts";
import { redrive } from "../cli/admin/dlq.ts";
import { repairFences } from "../cli/admin/repair.ts";
import { LOCAL_PUBSUB_PREFIX } from "../cli/local/cloud-run.ts";
import { startPipeline, type Pipeline, type ReconcileRecord } from "../cli/local/pipeline.ts";
import { ApiError } from "../clients/kube-http.ts";
import { deduplicationId, encodeKeyEvent, messageGroupId, PARENT_GENERATION_ANNOTATION, PARENT_UID_LABEL, type KeyEvent } from "../core/event.ts";
import { isStaleRefusal } from "../core/fence.ts";
import { defineOperator, type Operator } from "../core/operator.ts";
import { isOtherIncarnationRefusal } from "../core/ownership.ts";
import { pubSubNamesOf } from "../deploy/queue-names.ts";
import { operatorName } from "../deploy/rbac.ts";
import { ensureQueues, queueDefinitions } from "../emulator/queues.ts";
import { startLocalPubSub, type LocalPubSub } from "../emulator/pubsub.ts";
import type { QueueUrls } from "../emulator/types.ts";
import { lambdaHandler } from "../functions/adapters/lambda.ts";
import type { Poller } from "../functions/adapters/poller.ts";
import { createKubeApi } from "../functions/runtime/kube-api-http.ts";
import type { KubeObject } from "../functions/runtime/kube-api.ts";
import { signedForTest, TEST_EVENT_KEY } from "./support/event-key.ts";
import {
  CLUSTER,
  crApi,
  keyEventOf,
  pollerFor,
  ready,
  runtimeFor,
  startEnv,
  startTestBridge,
  waitFor,
  type Cr,
  type Env,
} from "./support/functions-environment.ts";
import { startLambdaEventSource, type EventSource } from "./support/lambda-event-source.ts";

const GROUP = "incarnations.crdfn.dev";
const webOf = (plural: string, kind: string, observe: boolean) =>
  defineOperator({
    resource: { group: GROUP, version: "v1", plural, kind },
    spec: z.object({ image: z.string() }),
    owns: [{ group: "", version: "v1", kind: "ConfigMap", observe }],
    reconcile: (o) => ({ children: [{ apiVersion: "v1", kind: "ConfigMap", metadata: { name: `${o.metadata.name}-app` }, data: { image: o.spec.image } }] }),
  }) as Operator<unknown>;
const viaPoller = webOf("pwebs", "PWeb", false);
const viaLambda = webOf("lwebs", "LWeb", true);
const viaCloudRun = webOf("cwebs", "CWeb", false);
/** Owns Secrets, and nothing runs it: the test writes as its function's identity by hand. */
const vault = defineOperator({
  resource: { group: GROUP, version: "v1", plural: "vaults", kind: "Vault" },
  spec: z.object({}),
  owns: [{ group: "", version: "v1", kind: "Secret" }],
  reconcile: () => ({}),
}) as Operator<unknown>;

type Child = {
  metadata?: { name?: string; uid?: string; resourceVersion?: string; annotations?: Record<string, string>; ownerReferences?: Array<{ uid?: string }> };
  data?: Record<string, string>;
};

/** Every change of the objects a watch sees after it opened, per name, in order. */
class Recorded<T extends { metadata?: { name?: string; resourceVersion?: string } }> {
  readonly seen = new Map<string, Array<{ type: string; object: T }>>();
  #stop: (() => void) | undefined;
  #stopped = false;

  async start(env: Env, path: string, labelSelector?: string): Promise<void> {
    const watch = new Watch(env.cluster.kubeConfig);
    let rv: string | undefined;
    const open = async (): Promise<void> => {
      const request = await watch.watch(
        path,
        { resourceVersion: rv ?? "0", ...(labelSelector ? { labelSelector } : {}), allowWatchBookmarks: true },
        (type: string, object: T) => {
          if (object.metadata?.resourceVersion) rv = object.metadata.resourceVersion;
          if (type === "BOOKMARK") return;
          const name = object.metadata?.name ?? "";
          this.seen.set(name, [...(this.seen.get(name) ?? []), { type, object }]);
        },
        () => {
          if (!this.#stopped) void open();
        },
      );
      this.#stop = () => request.abort();
    };
    await open();
  }

  since(name: string, resourceVersion: string): Array<{ type: string; object: T }> {
    return (this.seen.get(name) ?? []).filter((e) => BigInt(e.object.metadata?.resourceVersion ?? "0") > BigInt(resourceVersion));
  }

  stop(): void {
    this.#stopped = true;
    this.#stop?.();
  }
}

describe("identity, not names", { timeout: 600_000 }, () => {
  let env: Env;
  let bridge: RunningBridge;
  let poller: Poller;
  let source: EventSource;
  let pubsub: LocalPubSub;
  let pipeline: Pipeline;
  let lambdaQueues: QueueUrls;
  const children = new Recorded<Child>();
  const cloudRunRecords: ReconcileRecord[] = [];

  before(async () => {
    [env, pubsub] = await Promise.all([startEnv([viaPoller, viaLambda, vault], { file: import.meta.filename }), startLocalPubSub({ log: () => {} })]);
    lambdaQueues = await ensureQueues(env.sqs, queueDefinitions(`${env.cluster.namespace}-lambda`));
    bridge = await startTestBridge(env, [`${GROUP}/v1/pwebs>v1/configmaps`, `${GROUP}/v1/lwebs>v1/configmaps@${lambdaQueues.fifo}`].join(", "));
    poller = pollerFor(env, runtimeFor(env, viaPoller), "queue");
    const handler = lambdaHandler(viaLambda, { runtime: runtimeFor(env, viaLambda), sqs: env.sqs, logger: env.logger, clock: () => new Date() });
    source = startLambdaEventSource(env.sqs, lambdaQueues.fifo, handler, 2);
    pipeline = await startPipeline({
      cluster: env.cluster,
      pubsub,
      operators: [viaCloudRun],
      eventKey: TEST_EVENT_KEY,
      clusterName: CLUSTER,
      logger: pino({ level: "silent" }),
      functionLogLevel: "silent",
      onReconcile: (r) => cloudRunRecords.push(r),
      identities: { namespaces: [env.cluster.namespace], project: "incarnations" },
    });
    await children.start(env, `/api/v1/namespaces/${env.cluster.namespace}/configmaps`, PARENT_UID_LABEL);
  });
  after(async () => {
    children.stop();
    await source?.stop();
    await poller?.stop();
    await pipeline?.stop();
    await bridge?.stop(1000);
    await pubsub?.stop();
    await env?.cluster.stop();
  });

  const childOf = (name: string): Promise<Child | undefined> =>
    env.core.readNamespacedConfigMap({ name: `${name}-app`, namespace: env.cluster.namespace }).then(
      (c) => c as Child,
      () => undefined,
    );
  const converged = async (op: Operator<unknown>, name: string, image: string): Promise<Cr | undefined> => {
    const cr = await crApi(env, op).get(name);
    if (cr?.spec?.image !== image || ready(cr)?.status !== "True" || cr.status?.observedGeneration !== cr.metadata?.generation) return undefined;
    const child = await childOf(name);
    return child?.data?.image === image && child.metadata?.ownerReferences?.[0]?.uid === cr.metadata?.uid ? cr : undefined;
  };
  const untilConverged = async (op: Operator<unknown>, name: string, image: string): Promise<Cr> => {
    let cr: Cr | undefined;
    await waitFor(`${name}: ${image}, Ready`, async () => (cr = await converged(op, name, image)) !== undefined, 120_000);
    return cr!;
  };

  /** Created with image a, its first event kept as the bridge sent it (the object as created, no children yet); deleted; created again with image b. */
  async function recreate(op: Operator<unknown>, name: string): Promise<{ kept: KeyEvent; live: Cr; child: Child }> {
    const crs = crApi(env, op);
    const created = await crs.create(name, { image: "a" });
    const kept: KeyEvent = { ...keyEventOf(op, created, "ADDED"), v: 2, object: created as NonNullable<KeyEvent["object"]>, children: [] };
    await untilConverged(op, name, "a");
    await crs.delete(name);
    await waitFor(`${name} gone`, async () => (await crs.get(name)) === undefined);
    // At once, as a GitOps tool does: the garbage collector may not have removed the first one's child yet.
    await crs.create(name, { image: "b" });
    const live = await untilConverged(op, name, "b");
    assert.notEqual(live.metadata?.uid, kept.uid);
    return { kept, live, child: (await childOf(name))! };
  }

  const handledAsEarlier = (name: string) => () =>
    env.logs.some((l) => typeof l.msg === "string" && l.msg.startsWith("event of an earlier incarnation") && l.object === `${env.cluster.namespace}/${name}`);

  /** Nothing written to the child after `child` was read, and it is still the live object's, with its image. */
  const untouched = async (name: string, child: Child, live: Cr) => {
    const writes = children.since(`${name}-app`, child.metadata?.resourceVersion ?? "0");
    assert.deepEqual(
      writes.map((w) => `${w.type} ${w.object.data?.image ?? ""}`),
      [],
      `${name}: writes of the live child after the re-send`,
    );
    const now = await childOf(name);
    assert.equal(now?.data?.image, "b");
    assert.equal(now?.metadata?.ownerReferences?.[0]?.uid, live.metadata?.uid);
  };

  const sendTo = (queueUrl: string, event: KeyEvent) =>
    env.sqs.send(
      new SendMessageCommand({
        QueueUrl: queueUrl,
        MessageBody: encodeKeyEvent(signedForTest(event)),
        MessageGroupId: messageGroupId(event),
        MessageDeduplicationId: deduplicationId(event, `resent-${Date.now()}`),
      }),
    );

  it("an earlier incarnation's validly signed event, re-sent, writes nothing to the live object's children: poller, Lambda adapter, Cloud Run", async () => {
    const paths: Array<[string, Operator<unknown>, (e: KeyEvent) => Promise<unknown>, (name: string) => () => boolean | Promise<boolean>]> = [
      ["poller", viaPoller, (e) => sendTo(env.cluster.sqs.queues.fifo, e), handledAsEarlier],
      ["lambda", viaLambda, (e) => sendTo(lambdaQueues.fifo, e), handledAsEarlier],
      [
        "cloud run",
        viaCloudRun,
        async (e) => {
          const publisher = pubSubPublisher({ apiEndpoint: pubsub.host });
          try {
            const topic = pubSubNamesOf(pubsub.projectId, LOCAL_PUBSUB_PREFIX, operatorName(viaCloudRun)).topic;
            const [sent] = await publisher.publish(topic, [{ body: encodeKeyEvent(signedForTest(e)), orderingKey: messageGroupId(e) }]);
            assert.ok(sent?.ok, JSON.stringify(sent));
          } finally {
            await publisher.close();
          }
        },
        (name) => () => cloudRunRecords.some((r) => r.name === name && r.outcome.result === "success" && r.outcome.earlierIncarnation === true),
      ],
    ];
    await Promise.all(
      paths.map(async ([path, op, send, handled]) => {
        const name = `resent-${path.replace(" ", "-")}`;
        const { kept, live, child } = await recreate(op, name);
        await send(kept);
        await waitFor(`${path}: the re-sent event handled as an earlier incarnation's`, handled(name), 120_000);
        await untouched(name, child, live);
      }),
    );
  });

  it("a dead letter of an earlier incarnation, redriven as crdfn dlq redrive does, writes nothing to the live object's children", async () => {
    const name = "redriven";
    const { kept, live, child } = await recreate(viaPoller, name);
    await sendTo(env.cluster.sqs.queues.fifoDlq, kept);
    const moved = await redrive(env.sqs, env.cluster.sqs.queues.fifoDlq, env.cluster.sqs.queues.fifo, 100);
    assert.equal(moved.count, 1);
    await waitFor("the redriven letter handled as an earlier incarnation's", handledAsEarlier(name), 120_000);
    await untouched(name, child, live);
  });

  it("the function's own token can neither lower a fence in two writes nor move a child to another controller", async () => {
    const crs = crApi(env, viaPoller);
    const name = "attacked";
    await crs.create(name, { image: "a" });
    await untilConverged(viaPoller, name, "a");
    await crs.patchSpec(name, { image: "b" });
    const parent = await untilConverged(viaPoller, name, "b");
    const ref = { group: "", version: "v1", plural: "configmaps", namespace: env.cluster.namespace, name: `${name}-app` };
    const asTheFunction = createKubeApi({ connection: env.identities!.functionConnection(viaPoller) });
    const owner = (uid: string) => ({ apiVersion: `${GROUP}/v1`, kind: "PWeb", name, uid, controller: true, blockOwnerDeletion: true });
    const refused = async (what: string, patch: Record<string, unknown>) => {
      const e = await asTheFunction.mergePatch(ref, patch, "attacker").then(
        () => assert.fail(`${what}: accepted`),
        (error: unknown) => error,
      );
      assert.ok(e instanceof ApiError && e.code === 403, `${what}: ${String(e)}`);
      return e;
    };
    // Step one of the two-write attack: a made-up controller of the same name, fence 0, another image.
    const first = await refused("a made-up uid of the same name with fence 0", {
      metadata: { ownerReferences: [owner("00000000-0000-4000-8000-00000000dead")], annotations: { [PARENT_GENERATION_ANNOTATION]: "0" } },
      data: { image: "evil" },
    });
    assert.ok(isOtherIncarnationRefusal(first), first.message);
    // Lowering it under the real parent straight away is the fence's refusal.
    const second = await refused("fence 0 under the real parent", {
      metadata: { annotations: { [PARENT_GENERATION_ANNOTATION]: "0" } },
      data: { image: "evil" },
    });
    assert.ok(isStaleRefusal(second), second.message);
    // Another parent of the kind.
    const other = await crs.create("attacker-parent", { image: "x" });
    await refused("another parent's controller", { metadata: { ownerReferences: [{ ...owner(other.metadata!.uid!), name: "attacker-parent" }] } });
    const child = (await env.api.get(ref)) as KubeObject;
    assert.equal((child.data as Record<string, string>).image, "b");
    assert.equal((child.metadata.annotations as Record<string, string>)[PARENT_GENERATION_ANNOTATION], String(parent.metadata?.generation));
  });

  it("reads through writes: a function's token gets another parent's Secret of its own operator by an empty PATCH (as docs/security.md states), never another operator's or an unrelated one", async () => {
    const ns = env.cluster.namespace;
    const parents = await Promise.all(["vault-1", "vault-2"].map((n) => crApi(env, vault).create(n, {})));
    const pweb = await crApi(env, viaPoller).create("vault-neighbour", { image: "a" });
    const controlledBy = (apiVersion: string, kind: string, cr: Cr) => [
      { apiVersion, kind, name: cr.metadata?.name ?? "", uid: cr.metadata?.uid ?? "", controller: true },
    ];
    const secrets: Array<[string, ReturnType<typeof controlledBy> | undefined]> = [
      ["of-vault-2", controlledBy(`${GROUP}/v1`, "Vault", parents[1]!)],
      ["of-a-pweb", controlledBy(`${GROUP}/v1`, "PWeb", pweb)],
      ["unrelated", undefined],
    ];
    for (const [name, ownerReferences] of secrets)
      await env.core.createNamespacedSecret({
        namespace: ns,
        body: { metadata: { name, ...(ownerReferences ? { ownerReferences } : {}) }, stringData: { password: `secret-${name}` } },
      });
    const asTheFunction = createKubeApi({ connection: env.identities!.functionConnection(vault) });
    const emptyPatch = (name: string) => asTheFunction.mergePatch({ group: "", version: "v1", plural: "secrets", namespace: ns, name }, {}, "attacker");
    const read = await emptyPatch("of-vault-2");
    assert.equal(
      Buffer.from((read.data as Record<string, string>).password ?? "", "base64").toString(),
      "secret-of-vault-2",
      "one identity per operator: documented",
    );
    for (const name of ["of-a-pweb", "unrelated"]) {
      const refused = await emptyPatch(name).then(
        () => assert.fail(`${name}: returned`),
        (e: unknown) => e,
      );
      assert.ok(refused instanceof ApiError && refused.code === 403, `${name}: ${String(refused)}`);
    }
  });

  it("a fence an admin raised is reported within one reconcile (Ready=False, FenceAhead, an Event) and crdfn repair mends it; Ready=True is never shown behind the generation", async () => {
    const crs = crApi(env, viaPoller);
    const name = "wedged";
    const versions = new Recorded<Cr>();
    await versions.start(env, `/apis/${GROUP}/v1/namespaces/${env.cluster.namespace}/pwebs`);
    try {
      await crs.create(name, { image: "a" });
      await untilConverged(viaPoller, name, "a");
      const ref = { group: "", version: "v1", plural: "configmaps", namespace: env.cluster.namespace, name: `${name}-app` };
      // As an admin would (`kubectl annotate --overwrite`), or a tool that copies annotations.
      await env.api.mergePatch(ref, { metadata: { annotations: { [PARENT_GENERATION_ANNOTATION]: "999999" } } }, "kubectl-annotate");
      await crs.patchSpec(name, { image: "b" });
      await waitFor(
        "FenceAhead on the object",
        async () => {
          const cr = await crs.get(name);
          return ready(cr)?.reason === "FenceAhead" && cr?.status?.observedGeneration === cr?.metadata?.generation;
        },
        120_000,
      );
      const wedged = (await crs.get(name))!;
      assert.equal(ready(wedged)?.status, "False");
      assert.match(ready(wedged)?.message ?? "", /999999, above this PWeb's generation 2: .*crdfn repair pweb\/wedged/);
      const events = await env.core.listNamespacedEvent({ namespace: env.cluster.namespace });
      assert.ok(
        events.items.some((e) => e.reason === "FenceAhead" && e.involvedObject.name === name),
        "an Event says so",
      );
      const lowered = await repairFences(
        env.api,
        viaPoller,
        (await env.api.get({ group: GROUP, version: "v1", plural: "pwebs", namespace: env.cluster.namespace, name }))!,
        false,
      );
      assert.deepEqual(lowered, [{ child: `ConfigMap ${env.cluster.namespace}/${name}-app`, from: 999999, to: 2 }]);
      await untilConverged(viaPoller, name, "b");
      // Every version of the object the watch saw: after the function's first status write, none
      // with Ready=True behind its generation (the spec write itself carries the status before it).
      const seen = versions.seen.get(name) ?? [];
      const behind = seen.filter(({ object: o }, i) => {
        const before = i > 0 ? JSON.stringify(seen[i - 1]!.object.status) : undefined;
        return ready(o)?.status === "True" && (o.status?.observedGeneration ?? 0) < (o.metadata?.generation ?? 0) && JSON.stringify(o.status) !== before;
      });
      assert.deepEqual(
        behind.map(
          (v) => `${v.object.metadata?.resourceVersion}: generation ${v.object.metadata?.generation}, observed ${v.object.status?.observedGeneration}`,
        ),
        [],
      );
    } finally {
      versions.stop();
    }
  });

  it("a backup applied back after everything was deleted (annotations and owner references as saved): every object reconciled and Ready, none wedged", async () => {
    const crs = crApi(env, viaPoller);
    const names = ["backup-1", "backup-2", "backup-3"];
    for (const n of names) await crs.create(n, { image: "a" });
    for (const n of names) await crs.patchSpec(n, { image: "b" });
    for (const n of names) await untilConverged(viaPoller, n, "b");
    // `kubectl get pwebs,configmaps -o yaml`, less what the API server sets and refuses on a create.
    const saved = async (plural: string, group: string, selector?: string): Promise<KubeObject[]> =>
      (await env.api.list({ group, version: "v1", plural, namespace: env.cluster.namespace }, selector))
        .filter((o) => names.some((n) => o.metadata.name === n || o.metadata.name === `${n}-app`))
        .map(
          ({ status: _status, metadata: { uid: _u, resourceVersion: _r, creationTimestamp: _c, managedFields: _m, generation: _g, ...metadata }, ...o }) => ({
            ...o,
            apiVersion: group === "" ? "v1" : `${group}/v1`,
            kind: plural === "pwebs" ? "PWeb" : "ConfigMap",
            metadata: metadata,
          }),
        );
    const backup = [...(await saved("pwebs", GROUP)), ...(await saved("configmaps", "", PARENT_UID_LABEL))];
    assert.equal(backup.length, 6);
    assert.ok(backup.every((o) => o.kind !== "ConfigMap" || (o.metadata.annotations as Record<string, string>)[PARENT_GENERATION_ANNOTATION] === "2"));
    for (const n of names) await crs.delete(n);
    await waitFor(
      "everything gone",
      async () => (await Promise.all(names.map(async (n) => (await crs.get(n)) ?? (await childOf(n))))).every((o) => o === undefined),
      120_000,
    );
    // `kubectl apply --server-side -f backup.yaml`: the children first, as a file sorted by kind would have them.
    for (const o of [...backup].sort((a, b) => (a.kind === "ConfigMap" ? -1 : 0) - (b.kind === "ConfigMap" ? -1 : 0))) {
      const plural = o.kind === "PWeb" ? "pwebs" : "configmaps";
      await env.api.apply(
        { group: o.kind === "PWeb" ? GROUP : "", version: "v1", plural, namespace: env.cluster.namespace, name: o.metadata.name },
        o,
        "kubectl",
      );
    }
    for (const n of names) await untilConverged(viaPoller, n, "b");
    for (const n of names) {
      const cr = (await crs.get(n))!;
      assert.equal(ready(cr)?.reason, "Reconciled", n);
      assert.equal(
        (await childOf(n))?.metadata?.annotations?.[PARENT_GENERATION_ANNOTATION],
        String(cr.metadata?.generation),
        `${n}: its child's fence is its own generation`,
      );
    }
  });
});
