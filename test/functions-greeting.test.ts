// Greeting end to end: real kube-apiserver + ElasticMQ + the local poller, driven by key events
// published exactly as the bridge publishes them.
import { signedForTest } from "./support/event-key.ts";
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { SendMessageCommand } from "@aws-sdk/client-sqs";
import greeting, { configMapName } from "../examples/greeting/operator.ts";
import type { Operator } from "../core/operator.ts";
import type { Poller } from "../functions/adapters/poller.ts";
import { handleMessage, type Runtime } from "../functions/runtime/runtime.ts";
import {
  crApi,
  keyEventOf,
  pollerFor,
  publish,
  purgeAll,
  ready,
  receiveAll,
  runtimeFor,
  startEnv,
  waitFor,
  type Env,
} from "./support/functions-environment.ts";

const op = greeting as Operator<unknown>;

describe("Greeting operator, end to end", { timeout: 180_000 }, () => {
  let env: Env;
  let runtime: Runtime;
  let poller: Poller;
  const crs = () => crApi(env, op);
  const announce = async (name: string) => {
    const cr = await crs().get(name);
    if (cr) await publish(env, keyEventOf(op, cr));
  };
  const configMap = async (name: string) => {
    try {
      return await env.core.readNamespacedConfigMap({ name: configMapName(name), namespace: env.cluster.namespace });
    } catch {
      return undefined;
    }
  };

  before(async () => {
    env = await startEnv([op], { file: import.meta.filename });
    runtime = runtimeFor(env, op);
    poller = pollerFor(env, runtime);
  });
  after(async () => {
    await poller?.stop();
    await env?.cluster.stop();
  });

  it("create → ConfigMap and Ready=True with observedGeneration; update → ConfigMap updated; delete → gone", { timeout: 60_000 }, async () => {
    await crs().create("hello", { message: "hello world" });
    await announce("hello");
    await waitFor("Ready=True", async () => ready(await crs().get("hello"))?.status === "True");
    const cr = await crs().get("hello");
    assert.equal(cr?.status?.observedGeneration, cr?.metadata?.generation);
    assert.equal(cr?.status?.phase, "Ready");
    const cm = await configMap("hello");
    assert.equal(cm?.data?.message, "hello world");
    assert.equal(cm?.metadata?.ownerReferences?.[0]?.uid, cr?.metadata?.uid);
    assert.equal(cm?.metadata?.ownerReferences?.[0]?.controller, true);

    await crs().replaceSpec("hello", { message: "hello again" });
    await announce("hello");
    await waitFor("ConfigMap updated", async () => (await configMap("hello"))?.data?.message === "hello again");
    await waitFor("observedGeneration 2", async () => (await crs().get("hello"))?.status?.observedGeneration === 2);

    await crs().delete("hello");
    await publish(env, { ...keyEventOf(op, cr ?? {}), type: "DELETED" }, "deleted");
    await waitFor("Greeting gone", async () => (await crs().get("hello")) === undefined);
    // Garbage collection of the owned ConfigMap is the controller manager's (the CronTab test
    // waits for it); here the controller owner reference it relies on was checked above.
  });

  it("measures API calls per reconcile: first creation and steady state", { timeout: 30_000 }, async () => {
    const cr = await crs().create("counted", { message: "count me" });
    const event = keyEventOf(op, cr);
    const first = await handleMessage(runtime, { id: "m1", body: JSON.stringify(signedForTest(event)) });
    const steady = await handleMessage(runtime, { id: "m2", body: JSON.stringify(signedForTest(event)) });
    console.log(`# Greeting API calls per reconcile: first creation ${first.apiCalls}, steady state ${steady.apiCalls}`);
    assert.equal(first.result, "success");
    assert.equal(steady.result, "success");
    assert.ok(steady.apiCalls <= 3, `steady state made ${steady.apiCalls} calls`);
    const exposed = await env.registry.getSingleMetricAsString("crdfn_reconcile_api_calls");
    assert.match(exposed, /crdfn_reconcile_api_calls_bucket\{le="2",cluster="test",controller="greeting"\} [1-9]/, "the count is exposed as a metric");
    // The steady-state reconcile wrote nothing: the resourceVersion did not move.
    const afterFirst = await crs().get("counted");
    await handleMessage(runtime, { id: "m3", body: JSON.stringify(signedForTest(event)) });
    assert.equal((await crs().get("counted"))?.metadata?.resourceVersion, afterFirst?.metadata?.resourceVersion);
  });

  it("an invalid spec (passes the CRD, fails the zod refinement) → InvalidSpec and an Event; fixing it clears it", { timeout: 60_000 }, async () => {
    const cr = await crs().create("sloppy", { message: "  padded  " });
    await publish(env, keyEventOf(op, cr, "ADDED"));
    await waitFor("InvalidSpec", async () => ready(await crs().get("sloppy"))?.reason === "InvalidSpec");
    const condition = ready(await crs().get("sloppy"));
    assert.equal(condition?.status, "False");
    assert.match(condition?.message ?? "", /whitespace/);
    const events = await env.core.listNamespacedEvent({ namespace: env.cluster.namespace, fieldSelector: "involvedObject.name=sloppy" });
    assert.ok(events.items.some((e) => e.reason === "InvalidSpec" && e.type === "Warning" && e.involvedObject.uid === cr.metadata?.uid));
    assert.equal(await configMap("sloppy"), undefined);

    await crs().replaceSpec("sloppy", { message: "tidy" });
    await announce("sloppy");
    await waitFor("Ready=True after the fix", async () => ready(await crs().get("sloppy"))?.status === "True");
    assert.equal((await configMap("sloppy"))?.data?.message, "tidy");
  });

  it("20 concurrent writers → the final ConfigMap and status match the last spec; conflicts were retried", { timeout: 90_000 }, async () => {
    await crs().create("contended", { message: "start" });
    await announce("contended");
    const conflictsBefore = env.logs.filter((l) => l.msg === "409 Conflict; re-reading").length;
    await Promise.all(
      Array.from({ length: 20 }, async (_, writer) => {
        for (let round = 0; round < 3; round++) {
          for (;;) {
            try {
              await crs().replaceSpec("contended", { message: `writer ${writer} round ${round}` });
              break;
            } catch (e) {
              if ((e as { code?: number }).code !== 409) throw e;
            }
          }
          await announce("contended");
        }
      }),
    );
    const last = await crs().get("contended");
    const lastMessage = (last?.spec as { message: string }).message;
    await waitFor("converged on the last spec", async () => {
      const cr = await crs().get("contended");
      return (
        (await configMap("contended"))?.data?.message === lastMessage &&
        cr?.status?.observedGeneration === last?.metadata?.generation &&
        ready(cr)?.status === "True"
      );
    });
    const conflicts = env.logs.filter((l) => l.msg === "409 Conflict; re-reading").length - conflictsBefore;
    console.log(`# 20 writers × 3 updates: ${conflicts} conflicts re-read and retried`);
    assert.ok(conflicts > 0, "the writers raced the reconciles' status writes");
    assert.equal((await crs().get("contended"))?.metadata?.generation, last?.metadata?.generation);
    assert.deepEqual(await receiveAll(env, env.cluster.sqs.queues.fifoDlq), [], "nothing was given up on");
  });

  it("a poison message lands in the DLQ after 5 receives while other objects keep reconciling", { timeout: 90_000 }, async () => {
    await purgeAll(env);
    const { fifo, fifoDlq } = env.cluster.sqs.queues;
    await env.sqs.send(
      new SendMessageCommand({ QueueUrl: fifo, MessageBody: '{"v":1,"name":"not a key event"}', MessageGroupId: "poison", MessageDeduplicationId: "poison-1" }),
    );
    for (let i = 0; i < 5; i++) {
      const cr = await crs().create(`bystander-${i}`, { message: `bystander ${i}` });
      await publish(env, keyEventOf(op, cr, "ADDED"));
    }
    await waitFor("bystanders reconciled", async () => {
      for (let i = 0; i < 5; i++) if ((await configMap(`bystander-${i}`))?.data?.message !== `bystander ${i}`) return false;
      return true;
    });
    let dead: Awaited<ReturnType<typeof receiveAll>> = [];
    await waitFor("poison in the DLQ", async () => (dead = await receiveAll(env, fifoDlq)).length > 0, 60_000);
    assert.equal(dead[0]?.Body, '{"v":1,"name":"not a key event"}');
    const malformedLogs = env.logs.filter((l) => l.msg === "malformed key event; leaving it for the dead-letter queue");
    assert.equal(malformedLogs.length, 1, "logged once, not on every receive");
    const receives = env.logs.filter((l) => l.messageId === dead[0]?.MessageId && String(l.msg).startsWith("malformed key event"));
    assert.equal(receives.length, 5, "received exactly 5 times before the redrive policy moved it");
  });
});
