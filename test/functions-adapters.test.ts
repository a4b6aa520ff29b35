// The Lambda handler (driven with a real SQS batch, as Lambda's event source shapes it) and the
// functions-framework handlers (HTTP and CloudEvent) reach the same cluster state as the poller.
import { signedForTest } from "./support/event-key.ts";
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import type { AddressInfo } from "node:net";
import type { Server } from "node:http";
import { DeleteMessageCommand, SendMessageCommand, type Message } from "@aws-sdk/client-sqs";
import { cloudEvent, http } from "@google-cloud/functions-framework";
import { getTestServer } from "@google-cloud/functions-framework/testing";
import type { Context } from "aws-lambda";
import { messageGroupId } from "../core/event.ts";
import type { Operator } from "../core/operator.ts";
import { cloudEventHandler, httpHandler } from "../functions/adapters/http.ts";
import { lambdaHandler } from "../functions/adapters/lambda.ts";
import greeting, { configMapName } from "../examples/greeting/operator.ts";
import {
  CLUSTER,
  crApi,
  keyEventOf,
  lambdaEvent,
  pollerFor,
  publish,
  ready,
  receiveAll,
  runtimeFor,
  startEnv,
  waitFor,
  type Env,
} from "./support/functions-environment.ts";

const op = greeting as Operator<unknown>;
const MESSAGE = "same everywhere";

/** What Lambda's SQS event source would hand the function for these received messages. */

const lambdaContext = { functionName: "greeting", awsRequestId: "test", getRemainingTimeInMillis: () => 30_000 } as unknown as Context;

describe("adapters reach the same state as the poller", { timeout: 180_000 }, () => {
  let env: Env;
  let server: Server;
  let base: string;
  const crs = () => crApi(env, op);
  const stateOf = async (name: string) => {
    const cr = await crs().get(name);
    const cm = await env.core.readNamespacedConfigMap({ name: configMapName(name), namespace: env.cluster.namespace });
    const r = ready(cr);
    return { data: cm.data, phase: cr?.status?.phase, observedGeneration: cr?.status?.observedGeneration, ready: [r?.status, r?.reason] };
  };

  before(async () => {
    env = await startEnv([op], { file: import.meta.filename });
    // As Lambda and Cloud Run give it to the function: settings in the process environment.
    Object.assign(process.env, env.cluster.env, { CRDFN_CLUSTER: CLUSTER, LOG_LEVEL: "silent" });
    http("greeting-http", httpHandler(op));
    cloudEvent("greeting-events", cloudEventHandler(op));
    server = getTestServer("greeting-http");
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(async () => {
    await new Promise((r) => server?.close(r));
    await env?.cluster.stop();
  });

  it("poller (reference), Lambda batch, HTTP, Pub/Sub CloudEvent and SQS CloudEvent all converge alike", { timeout: 120_000 }, async () => {
    const names = ["via-poller", "via-lambda", "via-http", "via-pubsub", "via-sqs-event"];
    const created = new Map<string, Awaited<ReturnType<ReturnType<typeof crs>["create"]>>>();
    for (const n of names) created.set(n, await crs().create(n, { message: MESSAGE }));
    const eventFor = (n: string) => keyEventOf(op, created.get(n) ?? {}, "ADDED");

    // Reference: the local poller.
    await publish(env, eventFor("via-poller"));
    const poller = pollerFor(env, runtimeFor(env, op));
    await waitFor("poller reconciled", async () => ready(await crs().get("via-poller"))?.status === "True");
    await poller.stop();
    const reference = await stateOf("via-poller");
    assert.deepEqual(reference, { data: { message: MESSAGE }, phase: "Ready", observedGeneration: 1, ready: ["True", "Reconciled"] });

    // Lambda: a real batch from the FIFO queue, with a poison message heading another group.
    const { fifo } = env.cluster.sqs.queues;
    const poisonGroup = messageGroupId(eventFor("via-http"));
    await env.sqs.send(new SendMessageCommand({ QueueUrl: fifo, MessageBody: "not json", MessageGroupId: poisonGroup, MessageDeduplicationId: "poison" }));
    await publish(env, eventFor("via-http"), "behind-poison"); // same group, after the poison
    await publish(env, eventFor("via-lambda"));
    let batch: Message[] = [];
    await waitFor("a batch with all three", async () => {
      batch = [...batch, ...(await receiveAll(env, fifo, 60))];
      return batch.length >= 3;
    });
    const response = await lambdaHandler(op)(lambdaEvent(batch, fifo), lambdaContext);
    const failed = new Set(response.batchItemFailures.map((f) => f.itemIdentifier));
    const idOf = (pred: (m: Message) => boolean) => batch.find(pred)?.MessageId ?? "?";
    const poisonId = idOf((m) => m.Body === "not json");
    const behindId = idOf((m) => m.Body?.includes('"via-http"') ?? false);
    const lambdaId = idOf((m) => m.Body?.includes('"via-lambda"') ?? false);
    assert.ok(failed.has(poisonId), "the poison message failed");
    assert.ok(!failed.has(behindId), "a malformed message does not hold back the rest of its FIFO group");
    assert.ok(!failed.has(lambdaId), "the other group succeeded");
    // Lambda's event source deletes what the handler did not report as failed.
    for (const m of batch) if (!failed.has(m.MessageId ?? "")) await env.sqs.send(new DeleteMessageCommand({ QueueUrl: fifo, ReceiptHandle: m.ReceiptHandle }));
    assert.deepEqual(await stateOf("via-lambda"), reference);
    assert.deepEqual(await stateOf("via-http"), reference, "reconciled behind the poison message");

    // functions-framework HTTP: the body is the key event.
    const res = await fetch(`${base}/`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(signedForTest(eventFor("via-http"))),
    });
    assert.equal(res.status, 200);
    assert.deepEqual(await stateOf("via-http"), reference);
    const bad = await fetch(`${base}/`, { method: "POST", headers: { "content-type": "application/json" }, body: '{"v":2}' });
    assert.equal(bad.status, 503, "a malformed event is refused, so the push source retries and dead-letters it");

    // functions-framework CloudEvent: a Pub/Sub push in binary mode…
    const events = getTestServer("greeting-events");
    await new Promise<void>((r) => events.listen(0, "127.0.0.1", r));
    const eventsBase = `http://127.0.0.1:${(events.address() as AddressInfo).port}`;
    try {
      const pubsub = await fetch(`${eventsBase}/`, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          "ce-specversion": "1.0",
          "ce-id": "pubsub-1",
          "ce-source": "//pubsub.googleapis.com/projects/p/topics/crdfn-events",
          "ce-type": "google.cloud.pubsub.topic.v1.messagePublished",
        },
        body: JSON.stringify({
          message: { data: Buffer.from(JSON.stringify(signedForTest(eventFor("via-pubsub")))).toString("base64"), messageId: "pubsub-1" },
          subscription: "projects/p/subscriptions/s",
        }),
      });
      assert.equal(pubsub.status, 204);
      assert.deepEqual(await stateOf("via-pubsub"), reference);

      // …and an SQS message (as received from the queue) in a structured CloudEvent.
      await publish(env, eventFor("via-sqs-event"));
      let received: Message[] = [];
      await waitFor("the SQS message", async () => (received = (await receiveAll(env, fifo, 60)).filter((m) => m.Body?.includes("via-sqs-event"))).length > 0);
      const sqsEvent = await fetch(`${eventsBase}/`, {
        method: "POST",
        headers: { "content-type": "application/cloudevents+json" },
        body: JSON.stringify({
          specversion: "1.0",
          id: "sqs-1",
          source: "aws:sqs",
          type: "com.amazon.sqs.message",
          datacontenttype: "application/json",
          data: received[0],
        }),
      });
      assert.equal(sqsEvent.status, 204);
      assert.deepEqual(await stateOf("via-sqs-event"), reference);
    } finally {
      await new Promise((r) => events.close(r));
    }
  });
});
