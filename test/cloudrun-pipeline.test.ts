// The Cloud Run path, end to end, for real: a real API server and etcd, the bridge (its image's
// bundle, as its own process) publishing to the Pub/Sub emulator (an ordering key per object, a
// topic per operator), the local push
// deliverer POSTing each message to a functions-framework server per operator over real HTTP,
// each function running as its generated identity. The examples reconcile; ten rapid updates
// of one object converge on the last spec, in order and one reconcile at a time; a failure the
// object cannot record reaches the dead-letter topic after 5 deliveries, and a redrive brings it
// back once the cause is fixed; a forged event published to the topic reaches it too, unhandled.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  AuthorizationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  KubernetesObjectApi,
  PatchStrategy,
  RbacAuthorizationV1Api,
  loadYaml,
  type KubernetesObject,
} from "@kubernetes/client-node";
import { pino } from "pino";
import { stringify } from "yaml";
import { startPipeline, type ProcessPipeline, type ReconcileRecord } from "../cli/local/pipeline.ts";
import { LOCAL_PUBSUB_PREFIX } from "../cli/local/cloud-run.ts";
import { pubSubAdmin, type PubSubAdmin } from "../cli/admin/pubsub-admin.ts";
import { DEV_FUNCTIONS_NAMESPACE } from "../cli/local/dev-identities.ts";
import { encodeKeyEvent, messageGroupId, type KeyEvent } from "../core/event.ts";
import { signKeyEvent } from "../core/event-auth.ts";
import { pubSubPublisher } from "../bridge/pubsub-transport.ts";
import type { Operator } from "../core/operator.ts";
import { functionRbacOf } from "../deploy/rbac.ts";
import { pubSubNamesOf } from "../deploy/queue-names.ts";
import { startCluster, type LocalCluster } from "../emulator/cluster.ts";
import { startLocalPubSub, type LocalPubSub } from "../emulator/pubsub.ts";
import cronTab from "../examples/crontab/operator.ts";
import greeting, { configMapName } from "../examples/greeting/operator.ts";
import { eventually } from "./support/eventually.ts";

const operators = [greeting, cronTab] as Array<Operator<unknown>>;
type Cr = {
  metadata: { name: string; generation?: number };
  spec?: Record<string, unknown>;
  status?: { observedGeneration?: number; conditions?: Array<{ type: string; status: string; reason?: string }> };
};
const ready = (cr: Cr | undefined) => cr?.status?.conditions?.find((c) => c.type === "Ready");

describe("Cloud Run path: bridge → Pub/Sub → push → functions-framework", { timeout: 400_000 }, () => {
  let cluster: LocalCluster;
  let pubsub: LocalPubSub;
  let pipeline: ProcessPipeline;
  let admin: PubSubAdmin;
  const records: Array<ReconcileRecord & { endedAt: number }> = [];
  const objects = () => KubernetesObjectApi.makeApiClient(cluster.kubeConfig);
  const custom = () => cluster.kubeConfig.makeApiClient(CustomObjectsApi);
  const greetingNamed = async (name: string) =>
    (await custom()
      .getNamespacedCustomObject({ group: "example.com", version: "v1", plural: "greetings", namespace: "default", name })
      .catch(() => undefined)) as Cr | undefined;
  const configMap = (name: string) =>
    cluster.kubeConfig
      .makeApiClient(CoreV1Api)
      .readNamespacedConfigMap({ name, namespace: "default" })
      .catch(() => undefined);
  const apply = async (object: Record<string, unknown>) => {
    await objects().patch(loadYaml<KubernetesObject>(stringify(object)), undefined, undefined, "crdfn-test", true, PatchStrategy.ServerSideApply);
  };
  const names = (op: string) => pubSubNamesOf(pubsub.projectId, LOCAL_PUBSUB_PREFIX, op);

  before(async () => {
    [cluster, pubsub] = await Promise.all([startCluster({ log: () => {}, queue: false }), startLocalPubSub({ log: () => {} })]);
    pipeline = await startPipeline({
      cluster,
      pubsub,
      operators,
      logger: pino({ level: "silent" }),
      clusterName: "local",
      functionLogLevel: "silent",
      onReconcile: (r) => records.push({ ...r, endedAt: performance.now() }),
      identities: { namespaces: ["default"] },
      // The bridge as its image runs it: the bundle, and beside it the Pub/Sub library it loads on its first publish.
      bridgeProcess: true,
    });
    admin = await pubSubAdmin({ projectId: pubsub.projectId, emulatorHost: pubsub.host });
  });
  after(async () => {
    await admin?.close();
    await pipeline?.stop();
    await pubsub?.stop();
    await cluster?.stop();
  });

  it("creates each operator's topic, ordered push subscription with a dead-letter policy and retry policy, and dead-letter subscription", async () => {
    for (const op of ["greeting", "crontab"]) {
      const sub = await admin.subscription(names(op).subscription);
      assert.equal(sub?.topic, names(op).topic);
      assert.equal(sub?.enableMessageOrdering, true);
      assert.equal(sub?.deadLetterPolicy?.deadLetterTopic, names(op).deadLetterTopic);
      assert.equal(sub?.deadLetterPolicy?.maxDeliveryAttempts, 5);
      assert.ok(sub?.retryPolicy?.minimumBackoff, "a retry policy");
      assert.ok(await admin.topicExists(names(op).deadLetterTopic));
      assert.ok(await admin.subscription(names(op).deadLetterSubscription));
    }
  });

  it("reconciles both examples end to end", async () => {
    await apply({
      apiVersion: "example.com/v1",
      kind: "Greeting",
      metadata: { name: "hello-world", namespace: "default" },
      spec: { message: "Hello from Cloud Run" },
    });
    await apply({
      apiVersion: "stable.example.com/v1",
      kind: "CronTab",
      metadata: { name: "my-new-cron-object", namespace: "default" },
      spec: { cronSpec: "* * * * */5", image: "my-awesome-cron-image", replicas: 1 },
    });
    await eventually(
      async () => {
        assert.equal(ready(await greetingNamed("hello-world"))?.status, "True");
        assert.equal((await configMap(configMapName("hello-world")))?.data?.message, "Hello from Cloud Run");
      },
      { timeoutMs: 60_000 },
    );
    await eventually(
      async () => {
        const ct = (await custom().getNamespacedCustomObject({
          group: "stable.example.com",
          version: "v1",
          plural: "crontabs",
          namespace: "default",
          name: "my-new-cron-object",
        })) as Cr;
        assert.equal(ready(ct)?.status, "True");
      },
      { timeoutMs: 60_000 },
    );
    // The status is written inside the reconcile; its record is reported once the handler returns.
    await eventually(() => assert.ok(records.some((r) => r.kind === "CronTab" && r.outcome.result === "success")));
  });

  it("ten rapid updates of one object converge on the last spec, in order, one reconcile at a time", async () => {
    const from = records.length;
    for (let i = 0; i < 10; i++) {
      await custom().patchNamespacedCustomObject({
        group: "example.com",
        version: "v1",
        plural: "greetings",
        namespace: "default",
        name: "hello-world",
        body: [{ op: "replace", path: "/spec/message", value: `update ${i}` }],
      });
    }
    const mine = () => records.slice(from).filter((r) => r.kind === "Greeting" && r.name === "hello-world");
    // Converged, and every announcement delivered: the last one handled names the last generation.
    const final = await eventually(
      async () => {
        const cr = await greetingNamed("hello-world");
        assert.equal((await configMap(configMapName("hello-world")))?.data?.message, "update 9");
        assert.equal(cr?.status?.observedGeneration, cr?.metadata.generation);
        assert.equal(ready(cr)?.status, "True");
        assert.equal(mine().at(-1)?.generation, cr?.metadata.generation, "the last reconcile saw the last spec");
        return cr!;
      },
      { timeoutMs: 60_000 },
    );
    const generations = mine().map((r) => r.generation ?? 0);
    assert.deepEqual(
      generations,
      [...generations].sort((a, b) => a - b),
      `reconciled in the order announced: ${generations.join(", ")}`,
    );
    // On a loaded machine ten spec writes can outrun a reconcile's bounded re-reads after 409s
    // ("still conflicting": the message is redelivered), or an API request can time out
    // ("unavailable": deferred); never anything else, and the last reconcile succeeds.
    const others = mine().filter((r) => r.outcome.result !== "success");
    assert.ok(
      others.every((r) => r.outcome.result === "retry" || r.outcome.result === "unavailable"),
      `outcomes: ${JSON.stringify(others.map((r) => r.outcome))}`,
    );
    assert.equal(mine().at(-1)?.outcome.result, "success");
    if (others.length > 0) console.log(`# redelivered under load: ${JSON.stringify(others.map((r) => r.outcome))}`);
    assert.equal(final.spec?.message, "update 9");
    console.log(`# generations reconciled after 10 updates: ${generations.join(", ")}`);
    const spans = mine().map((r) => [r.endedAt - r.latencyMs, r.endedAt] as const);
    for (let i = 1; i < spans.length; i++) assert.ok(spans[i]![0] >= spans[i - 1]![1] - 1, "never two reconciles of the object at once");
  });

  it("a failure the object cannot record reaches the dead-letter topic after 5 deliveries; a redrive reconciles it once fixed", async () => {
    const rbac = cluster.kubeConfig.makeApiClient(RbacAuthorizationV1Api);
    const authz = cluster.kubeConfig.makeApiClient(AuthorizationV1Api);
    const canCreateConfigMaps = async () =>
      (
        await authz.createSubjectAccessReview({
          body: {
            spec: {
              user: `system:serviceaccount:${DEV_FUNCTIONS_NAMESPACE}:crdfn-greeting`,
              resourceAttributes: { namespace: "default", verb: "create", resource: "configmaps" },
            },
          },
        })
      ).status?.allowed === true;
    const binding = functionRbacOf(greeting as Operator<unknown>, { functionsNamespace: DEV_FUNCTIONS_NAMESPACE, namespaces: ["default"] }).find(
      (m) => m.kind === "RoleBinding",
    )!;
    // The cause: the function's grants are gone, so it can neither write the child nor record why on the object.
    await rbac.deleteNamespacedRoleBinding({ name: (binding.metadata as { name: string }).name, namespace: "default" });
    await eventually(async () => assert.equal(await canCreateConfigMaps(), false));

    const from = records.length;
    await apply({ apiVersion: "example.com/v1", kind: "Greeting", metadata: { name: "dead-letter-me", namespace: "default" }, spec: { message: "later" } });
    const dead = await eventually(
      async () => {
        const letters = await admin.peek(names("greeting").deadLetterSubscription, 10);
        assert.equal(letters.length, 1);
        return letters[0]!;
      },
      { timeoutMs: 120_000, intervalMs: 1000 },
    );
    assert.match(dead.body, /"name":"dead-letter-me"/);
    const attempts = records
      .slice(from)
      .filter((r) => r.name === "dead-letter-me")
      .map((r) => `${r.outcome.result}#${r.receiveCount}`);
    assert.deepEqual(attempts, ["retry#1", "retry#2", "retry#3", "retry#4", "retry#5"], "five deliveries, each counted by Pub/Sub's deliveryAttempt");
    assert.equal(
      dead.orderingKey || messageGroupId({ cluster: "local", group: "example.com", plural: "greetings", namespace: "default", name: "dead-letter-me" }),
      messageGroupId({ cluster: "local", group: "example.com", plural: "greetings", namespace: "default", name: "dead-letter-me" }),
    );
    assert.equal(await configMap(configMapName("dead-letter-me")), undefined, "nothing was written");

    // The fix, then the redrive: back into the object's ordering key on its topic.
    await apply(binding);
    await eventually(async () => assert.equal(await canCreateConfigMaps(), true));
    const moved = await admin.redrive(names("greeting"), 100);
    assert.equal(moved.count, 1);
    assert.deepEqual([...moved.byKind], [["Greeting", 1]]);
    await eventually(
      async () => {
        assert.equal(ready(await greetingNamed("dead-letter-me"))?.status, "True");
        assert.equal((await configMap(configMapName("dead-letter-me")))?.data?.message, "later");
      },
      { timeoutMs: 60_000 },
    );
    assert.deepEqual(await admin.peek(names("greeting").deadLetterSubscription, 10), [], "the dead-letter subscription is empty");
  });

  it("a forged event published to the operator's topic is refused on every delivery and reaches the dead-letter topic; nothing is written", async () => {
    // Whoever may publish to the topic is not thereby the bridge: a body with the object's real
    // uid and resourceVersion and a made-up spec, unsigned or signed with another key.
    const FORGED = "FORGED-BY-TOPIC-PUBLISHER";
    await apply({ apiVersion: "example.com/v1", kind: "Greeting", metadata: { name: "forge-target", namespace: "default" }, spec: { message: "mine" } });
    const target = await eventually(async () => {
      const cr = await greetingNamed("forge-target");
      assert.equal(ready(cr)?.status, "True");
      return cr as Cr & { metadata: { uid: string; resourceVersion: string; generation: number } };
    });
    const childBefore = (await configMap(configMapName("forge-target")))?.metadata?.resourceVersion;
    const made: KeyEvent = {
      v: 2,
      cluster: "local",
      group: "example.com",
      version: "v1",
      plural: "greetings",
      kind: "Greeting",
      namespace: "default",
      name: "forge-target",
      uid: target.metadata.uid,
      resourceVersion: target.metadata.resourceVersion,
      generation: target.metadata.generation,
      type: "MODIFIED",
      observedAt: new Date().toISOString(),
      object: { ...target, metadata: { ...target.metadata }, spec: { message: FORGED } },
    };
    const attacks = [made, signKeyEvent(made, { kid: "attacker", secret: Buffer.alloc(32, 0x66) })];
    const publisher = pubSubPublisher({ apiEndpoint: pubsub.host });
    try {
      const sent = await publisher.publish(
        names("greeting").topic,
        // The attacker picks the ordering key too: the second in a key of its own is delivered beside the first.
        attacks.map((e, i) => ({ body: encodeKeyEvent(e), orderingKey: i === 0 ? messageGroupId(e) : "attacker" })),
      );
      assert.ok(
        sent.every((o) => o.ok),
        JSON.stringify(sent),
      );
    } finally {
      await publisher.close();
    }
    const dead = await eventually(
      async () => {
        const letters = (await admin.peek(names("greeting").deadLetterSubscription, 10)).filter((l) => l.body.includes(FORGED));
        assert.equal(letters.length, attacks.length);
        return letters;
      },
      { timeoutMs: 120_000, intervalMs: 1000 },
    );
    assert.equal(dead.length, 2, "both attacks dead-lettered");
    const cm = await configMap(configMapName("forge-target"));
    assert.equal(cm?.data?.message, "mine", "the child keeps the owner's spec");
    assert.equal(cm?.metadata?.resourceVersion, childBefore, "the child was never written");
    assert.equal(ready(await greetingNamed("forge-target"))?.status, "True");
    for (const l of dead) await (await admin.hold(names("greeting").deadLetterSubscription, l.id))?.remove();
  });
});
