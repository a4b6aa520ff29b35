// Whoever may send to the queue is not thereby the bridge. A body sent straight to the
// queue — forged with a real uid and resourceVersion and no MAC, a MAC made with another key or
// with the key of another operator of the cluster (taken from that operator's function), or a
// genuine signed event from the bridge with its spec changed — is dead-lettered on the
// poller and Lambda paths and refused on Cloud Run's (CloudEvent push; its dead-letter topic:
// test/cloudrun-pipeline.test.ts), with one log line naming the cluster and
// the object, and the child is never written. A genuine event keeps a verifying MAC when it is
// re-sent for a deferral and when `crdfn dlq redrive` moves it back from the dead-letter queue.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import type { AddressInfo } from "node:net";
import type { Server } from "node:http";
import { DeleteMessageCommand, SendMessageCommand, type Message } from "@aws-sdk/client-sqs";
import { cloudEvent } from "@google-cloud/functions-framework";
import { getTestServer } from "@google-cloud/functions-framework/testing";
import type { Context } from "aws-lambda";
import { deduplicationId, encodeKeyEvent, messageGroupId, parseKeyEvent, type KeyEvent } from "../core/event.ts";
import { signKeyEvent, verifyKeyEvent } from "../core/event-auth.ts";
import type { Operator } from "../core/operator.ts";
import { redrive } from "../cli/admin/dlq.ts";
import greeting, { configMapName } from "../examples/greeting/operator.ts";
import { cloudEventHandler } from "../functions/adapters/http.ts";
import { lambdaHandler } from "../functions/adapters/lambda.ts";
import { resendRequest } from "../functions/adapters/settle.ts";
import { fromSqsMessage } from "../clients/queue-message.ts";
import { DEFERRED_SINCE_ATTRIBUTE } from "../functions/runtime/delivery.ts";
import { TEST_EVENT_KEY, testKeyring, testOperatorKey } from "./support/event-key.ts";
import { startLambdaEventSource } from "./support/lambda-event-source.ts";
import {
  CLUSTER,
  crApi,
  lambdaEvent,
  pollerFor,
  purgeAll,
  ready,
  receiveAll,
  runtimeFor,
  startEnv,
  startTestBridge,
  waitFor,
  type Env,
} from "./support/functions-environment.ts";
import { handleMessage } from "../functions/runtime/runtime.ts";

const op = greeting as Operator<unknown>;
const FORGED = "FORGED-BY-QUEUE-SENDER";
const lambdaContext = { functionName: "greeting", awsRequestId: "test", getRemainingTimeInMillis: () => 30_000 } as unknown as Context;

describe("a forged or altered event body is never trusted", { timeout: 240_000 }, () => {
  let env: Env;
  /** The bridge's own event for the object "victim", as it sent it (signed). */
  let genuine: KeyEvent;
  const crs = () => crApi(env, op);
  const child = () => env.core.readNamespacedConfigMap({ name: configMapName("victim"), namespace: env.cluster.namespace });
  /** The victim's child and status as they stand: what no refused event may change. */
  const world = async () => {
    const cm = await child();
    const cr = await crs().get("victim");
    return { message: cm.data?.message, childVersion: cm.metadata?.resourceVersion, status: cr?.status };
  };
  /** The attacks, each on the victim's real uid and resourceVersion. */
  const attacks = (): Array<[string, KeyEvent]> => {
    const { kid: _kid, mac: _mac, ...unsigned } = genuine;
    const made = { ...unsigned, v: 2 as const, object: { ...genuine.object!, spec: { message: FORGED } } };
    return [
      ["no MAC", made],
      ["a MAC with another key", signKeyEvent(made, { kid: TEST_EVENT_KEY.kid, secret: Buffer.alloc(32, 0x66) })],
      // What a leak of the CronTab function's environment gives: its operator's key, same kid.
      ["a MAC with another operator's key", signKeyEvent(made, testOperatorKey("crontabs.stable.example.com"))],
      ["the bridge's event, its spec changed", { ...genuine, object: { ...genuine.object!, spec: { message: FORGED } } }],
    ];
  };
  /** An attacker picks the message group too: `group` keeps an attack clear of whatever an earlier case left in the victim's. */
  const send = (e: KeyEvent, cause: string, group = messageGroupId(e)) =>
    env.sqs.send(
      new SendMessageCommand({
        QueueUrl: env.cluster.sqs.queues.fifo,
        MessageBody: encodeKeyEvent(e),
        MessageGroupId: group,
        MessageDeduplicationId: deduplicationId(e, cause),
      }),
    );
  const refusals = () => env.logs.filter((l) => typeof l.msg === "string" && l.msg.includes("MAC does not verify"));

  before(async () => {
    // One receive, then the dead-letter queue: what can never be handled gets there at once.
    env = await startEnv([op], { file: import.meta.filename, maxReceiveCount: 1 });
    Object.assign(process.env, env.cluster.env, { CRDFN_CLUSTER: CLUSTER, LOG_LEVEL: "silent" });
    // The real bridge announces the object; its event is taken off the queue as it sent it.
    const bridge = await startTestBridge(env, "example.com/v1/greetings>v1/configmaps");
    try {
      await crs().create("victim", { message: "hello" });
      let got: Message[] = [];
      await waitFor("the bridge's event for victim", async () =>
        (got = [...got, ...(await receiveAll(env, env.cluster.sqs.queues.fifo, 60))]).some((m) => m.Body?.includes('"name":"victim"')),
      );
      const parsed = parseKeyEvent(got.find((m) => m.Body?.includes('"name":"victim"'))?.Body ?? "");
      assert.ok(parsed.ok);
      genuine = parsed.event;
      // Handled by the Lambda handler: a genuine event is trusted.
      const response = await lambdaHandler(op)(lambdaEvent(got, env.cluster.sqs.queues.fifo), lambdaContext);
      assert.deepEqual(response.batchItemFailures, []);
      for (const m of got) await env.sqs.send(new DeleteMessageCommand({ QueueUrl: env.cluster.sqs.queues.fifo, ReceiptHandle: m.ReceiptHandle }));
    } finally {
      await bridge.stop(1000);
    }
    assert.equal(genuine.v, 3);
    assert.equal(genuine.kid, TEST_EVENT_KEY.kid);
    assert.deepEqual(verifyKeyEvent(genuine, testKeyring(op.resource)), { ok: true });
    assert.equal(verifyKeyEvent(genuine, testKeyring("crontabs.stable.example.com")).ok, false, "signed with the Greetings' key, no other operator's");
    assert.equal((await child()).data?.message, "hello");
    // What the bridge announced after the function's writes, handled: the world at rest.
    const poller = pollerFor(env, runtimeFor(env, op), "queue");
    await waitFor("victim Ready", async () => ready(await crs().get("victim"))?.status === "True");
    await poller.stop();
  });
  after(async () => {
    await env?.cluster.stop();
  });

  it("poller: each attack is dead-lettered with one line naming the cluster and the object, the child untouched", async () => {
    await purgeAll(env);
    const before = await world();
    const from = env.logs.length;
    for (const [what, e] of attacks()) await send(e, `poller ${what}`);
    // The queue's own visibility: a 2 s one can lapse on a loaded machine, and a second receive
    // of a message would move it to the dead-letter queue unhandled (maxReceiveCount 1).
    const poller = pollerFor(env, runtimeFor(env, op), "queue");
    let dead: Message[] = [];
    try {
      await waitFor(
        "the attacks in the dead-letter queue",
        async () => (dead = [...dead, ...(await receiveAll(env, env.cluster.sqs.queues.fifoDlq, 60))]).length >= attacks().length,
        90_000,
      );
    } finally {
      await poller.stop();
    }
    assert.ok(
      dead.every((m) => m.Body?.includes(FORGED)),
      "exactly the attacks were dead-lettered",
    );
    const lines = env.logs.slice(from).filter((l) => typeof l.msg === "string" && l.msg.includes("MAC does not verify"));
    // One line per attack the runtime was handed. On a loaded machine the poller may defer one
    // (its cluster's circuit open after a slow request) and, with one receive allowed here, the
    // queue dead-letters it untried: still dead-lettered, the child still untouched, no line.
    const handed = new Set(lines.map((l) => l.messageId));
    assert.ok(
      lines.length >= 1 && lines.length <= attacks().length && handed.size === lines.length,
      `one line per attack handled:\n${env.logs
        .slice(from)
        .map((l) => JSON.stringify(l))
        .join("\n")}`,
    );
    for (const l of lines) {
      assert.match(String(l.msg), new RegExp(`^key event for Greeting ${env.cluster.namespace}/victim of cluster "${CLUSTER}" refused: MAC does not verify`));
      assert.ok(!JSON.stringify(l).includes(TEST_EVENT_KEY.secret.toString("base64")), "the key is never logged");
    }
    if (lines.length === attacks().length)
      assert.ok(
        lines.some((l) => /carries none \(a v2 event/.test(String(l.msg))),
        "the unsigned one says so",
      );
    assert.deepEqual(await world(), before, "child and status untouched");
    for (const m of dead) await env.sqs.send(new DeleteMessageCommand({ QueueUrl: env.cluster.sqs.queues.fifoDlq, ReceiptHandle: m.ReceiptHandle }));
  });

  it("Lambda: each attack, in the batch the event source hands over, is reported failed, reaches the dead-letter queue, and nothing is written", async () => {
    await purgeAll(env);
    const before = await world();
    const { fifo, fifoDlq } = env.cluster.sqs.queues;
    // Each in a group of its own: a message the poller's case left in flight in the victim's (a
    // deferral held on a loaded machine) would hold that group past this wait.
    for (const [what, e] of attacks()) await send(e, `lambda ${what}`, `lambda-attacks-${what.replace(/[^A-Za-z0-9]/g, "-")}`);
    // Lambda's event source as AWS runs it: a failed record stays, made visible again at once by
    // the handler, and its next receive (one allowed here) moves it to the dead-letter queue.
    const source = startLambdaEventSource(env.sqs, fifo, lambdaHandler(op), 1, 30);
    let dead: Message[] = [];
    try {
      await waitFor(
        "the attacks in the dead-letter queue",
        async () => (dead = [...dead, ...(await receiveAll(env, fifoDlq, 60))]).length >= attacks().length,
        90_000,
      );
    } finally {
      await source.stop();
    }
    assert.equal(dead.length, attacks().length);
    assert.ok(
      dead.every((m) => m.Body?.includes(FORGED)),
      "exactly the attacks were dead-lettered",
    );
    assert.deepEqual(await world(), before, "child and status untouched");
    for (const m of dead) await env.sqs.send(new DeleteMessageCommand({ QueueUrl: fifoDlq, ReceiptHandle: m.ReceiptHandle }));
  });

  it("Cloud Run (a Pub/Sub push to the CloudEvent function): each attack is refused, nothing is written; the genuine event is accepted", async () => {
    cloudEvent("greeting-auth-events", cloudEventHandler(op));
    const server: Server = getTestServer("greeting-auth-events");
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const push = (e: KeyEvent, id: string) =>
      fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          "ce-specversion": "1.0",
          "ce-id": id,
          "ce-source": "//pubsub.googleapis.com/projects/p/topics/crdfn-events",
          "ce-type": "google.cloud.pubsub.topic.v1.messagePublished",
        },
        body: JSON.stringify({
          message: { data: Buffer.from(encodeKeyEvent(e)).toString("base64"), messageId: id },
          subscription: "projects/p/subscriptions/s",
        }),
      });
    try {
      const before = await world();
      for (const [what, e] of attacks()) {
        const res = await push(e, `attack-${what}`);
        assert.ok(res.status >= 400, `${what}: refused (${res.status}), so the subscription dead-letters it`);
      }
      assert.deepEqual(await world(), before, "child and status untouched");
      assert.equal((await push(genuine, "genuine")).status, 204, "the bridge's own event is handled");
    } finally {
      await new Promise((r) => server.close(r));
    }
  });

  it("a genuine event re-sent for a deferral, and one redriven from the dead-letter queue, still verify and are handled", async () => {
    const { fifo, fifoDlq } = env.cluster.sqs.queues;
    await purgeAll(env);
    await send(genuine, "to be deferred");
    let original: Message[] = [];
    await waitFor("the genuine event", async () => (original = await receiveAll(env, fifo, 60)).length > 0);
    // Exactly what an adapter sends when it defers a message past its receive budget: its
    // deferral attributes under the MAC the receiving runtime makes (settle.ts settleBatch).
    const deferring = runtimeFor(env, op).receive(fromSqsMessage(original[0]!));
    assert.ok(deferring.ok);
    const since = Date.now();
    const resend = { action: "resend" as const, since, deferrals: 1, seconds: 0, attributes: deferring.deferralAttributes(since, 1) };
    await env.sqs.send(new SendMessageCommand(resendRequest(fifo, original[0]!, resend)));
    await env.sqs.send(new DeleteMessageCommand({ QueueUrl: fifo, ReceiptHandle: original[0]!.ReceiptHandle }));
    // And a genuine event in the dead-letter queue, moved back by `crdfn dlq redrive`.
    await env.sqs.send(
      new SendMessageCommand({
        QueueUrl: fifoDlq,
        MessageBody: encodeKeyEvent(genuine),
        MessageGroupId: messageGroupId(genuine),
        MessageDeduplicationId: "dead-genuine",
      }),
    );
    const moved = await redrive(env.sqs, fifoDlq, fifo, 10);
    assert.equal(moved.count, 1);
    const from = env.logs.length;
    // Both copies are in the victim's FIFO group: received, checked and handled one by one.
    const runtime = runtimeFor(env, op);
    const outcomes: string[] = [];
    await waitFor(
      "the deferred copy and the redriven one handled",
      async () => {
        for (const m of await receiveAll(env, fifo, 30)) {
          const parsed = parseKeyEvent(m.Body ?? "");
          assert.ok(parsed.ok);
          assert.deepEqual(verifyKeyEvent(parsed.event, testKeyring(op.resource)), { ok: true }, "a re-sent event keeps its proof");
          const attributes = Object.fromEntries(Object.entries(m.MessageAttributes ?? {}).map(([k, v]) => [k, v.StringValue ?? ""]));
          // The deferred copy's attributes verify (they are kept, so its deferral limit still counts from `since`).
          const received = runtime.receive({ id: m.MessageId ?? "", body: m.Body ?? "", receiveCount: 1, attributes });
          if (attributes[DEFERRED_SINCE_ATTRIBUTE] !== undefined)
            assert.equal(received.ok && received.message.attributes?.[DEFERRED_SINCE_ATTRIBUTE], String(since));
          outcomes.push((await handleMessage(runtime, { id: m.MessageId ?? "", body: m.Body ?? "", receiveCount: 1, attributes })).result);
          await env.sqs.send(new DeleteMessageCommand({ QueueUrl: fifo, ReceiptHandle: m.ReceiptHandle }));
        }
        return outcomes.length >= 2;
      },
      90_000,
    );
    assert.deepEqual(outcomes, ["success", "success"]);
    assert.equal(env.logs.slice(from).filter((l) => typeof l.msg === "string" && l.msg.includes("MAC does not verify")).length, 0);
    assert.ok(refusals().length <= attacks().length, "only the poller's attacks were ever logged as refused (Lambda and push log to their own loggers)");
    assert.equal((await child()).data?.message, "hello");
  });
});
