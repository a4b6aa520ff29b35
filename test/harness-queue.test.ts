// The queue behaves as SQS does where crdfn depends on it: FIFO order, deduplication,
// redelivery after the visibility timeout, dead-lettering after 5 receives, typed errors.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import {
  DeleteMessageCommand,
  GetQueueAttributesCommand,
  GetQueueUrlCommand,
  QueueDoesNotExist,
  ReceiveMessageCommand,
  SendMessageCommand,
  type SQSClient,
  type Message,
} from "@aws-sdk/client-sqs";
import { startCluster, type LocalCluster } from "../emulator/cluster.ts";
import { sqsClient } from "../clients/sqs-client.ts";
import { MAX_RECEIVE_COUNT } from "../emulator/queues.ts";
import { pino } from "pino";
import { startPoller } from "../functions/adapters/poller.ts";
import { givenSqsClient } from "../functions/runtime/sqs-client.ts";
import { eventually } from "./support/eventually.ts";
import { fakeRuntime } from "./support/fake-runtime.ts";

describe("local SQS queue", { timeout: 120_000 }, () => {
  let cluster: LocalCluster;
  let sqs: SQSClient;

  const receive = async (queueUrl: string, visibility: number, waitSeconds = 1): Promise<Message[]> =>
    (await sqs.send(new ReceiveMessageCommand({ QueueUrl: queueUrl, MaxNumberOfMessages: 10, VisibilityTimeout: visibility, WaitTimeSeconds: waitSeconds })))
      .Messages ?? [];

  before(async () => {
    cluster = await startCluster({ controllerManager: false, log: () => {} });
    sqs = sqsClient(cluster.sqs);
  });
  after(async () => {
    sqs?.destroy();
    await cluster?.stop();
  });

  it("delivers one FIFO group in order", async () => {
    const q = cluster.sqs.queues.fifo;
    for (const n of [1, 2, 3]) {
      await sqs.send(new SendMessageCommand({ QueueUrl: q, MessageBody: `m${n}`, MessageGroupId: "order", MessageDeduplicationId: `order-${n}` }));
    }
    const got: string[] = [];
    while (got.length < 3) {
      const batch = await receive(q, 30);
      assert.ok(batch.length > 0, "queue ran dry");
      for (const m of batch) got.push(m.Body!);
      // Deleting is what lets the next messages of the group through.
      for (const m of batch) await sqs.send(new DeleteMessageCommand({ QueueUrl: q, ReceiptHandle: m.ReceiptHandle }));
    }
    assert.deepEqual(got, ["m1", "m2", "m3"]);
  });

  it("drops a repeated MessageDeduplicationId", async () => {
    const q = cluster.sqs.queues.fifo;
    for (const body of ["first", "second"]) {
      await sqs.send(new SendMessageCommand({ QueueUrl: q, MessageBody: body, MessageGroupId: "dedup", MessageDeduplicationId: "same-id" }));
    }
    const batch = await receive(q, 30);
    assert.deepEqual(
      batch.map((m) => m.Body),
      ["first"],
    );
  });

  it("redelivers a message that was not deleted within its visibility timeout", async () => {
    const q = cluster.sqs.queues.fifo;
    await sqs.send(new SendMessageCommand({ QueueUrl: q, MessageBody: "again", MessageGroupId: "redeliver", MessageDeduplicationId: "again" }));
    const [first] = await receive(q, 2);
    assert.equal(first?.Body, "again");
    assert.deepEqual(await receive(q, 2, 0), [], "visible again before its timeout");
    const second = await eventually(async () => {
      const [m] = await receive(q, 1);
      assert.ok(m);
      return m;
    });
    assert.equal(second.Body, "again");
    assert.notEqual(second.ReceiptHandle, first.ReceiptHandle);
  });

  it(`moves a message to the DLQ after ${MAX_RECEIVE_COUNT} receives`, async () => {
    const q = cluster.sqs.queues.fifo;
    await sqs.send(new SendMessageCommand({ QueueUrl: q, MessageBody: "poison", MessageGroupId: "poison", MessageDeduplicationId: "poison-1" }));
    let receives = 0;
    await eventually(
      async () => {
        const batch = await receive(q, 1);
        receives += batch.filter((m) => m.Body === "poison").length;
        const dead = await receive(cluster.sqs.queues.fifoDlq, 30);
        assert.deepEqual(
          dead.map((m) => m.Body),
          ["poison"],
        );
      },
      { timeoutMs: 30_000, intervalMs: 1100 },
    );
    assert.equal(receives, MAX_RECEIVE_COUNT);
  });

  it("answers a missing queue with the SDK's typed QueueDoesNotExist", async () => {
    const err = await sqs.send(new GetQueueUrlCommand({ QueueName: "no-such-queue" })).then(
      () => assert.fail("a missing queue was found"),
      (e: unknown) => e,
    );
    assert.ok(err instanceof QueueDoesNotExist, `got ${String(err)}`);
    assert.equal(err.name, "QueueDoesNotExist");
  });

  it("the local poller deletes what it handled, ten at a time, and what still waits when it stops", async () => {
    const q = cluster.sqs.queues.fifo;
    const counts = async () => {
      const a =
        (
          await sqs.send(
            new GetQueueAttributesCommand({ QueueUrl: q, AttributeNames: ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"] }),
          )
        ).Attributes ?? {};
      return [a.ApproximateNumberOfMessages, a.ApproximateNumberOfMessagesNotVisible];
    };
    // Earlier tests leave messages in flight in this queue.
    const before = await counts();
    for (let n = 0; n < 25; n++) {
      await sqs.send(new SendMessageCommand({ QueueUrl: q, MessageBody: `p${n}`, MessageGroupId: `p${n}`, MessageDeduplicationId: `poller-${n}` }));
    }
    const handled: string[] = [];
    const runtime = fakeRuntime((m) => (handled.push(m.body), { result: "success" as const }));
    // A window longer than the test: only full batches go out before stop.
    const poller = startPoller({
      sqs: givenSqsClient(sqs),
      queueUrls: [q, q],
      runtime,
      waitTimeSeconds: 1,
      deleteWindowMs: 600_000,
      logger: pino({ level: "silent" }),
    });
    await eventually(() => assert.equal(handled.length, 25), { timeoutMs: 30_000 });
    await poller.stop();
    assert.deepEqual(await counts(), before, "every handled message was deleted");
    assert.equal(new Set(handled).size, 25, "none was handed over twice");
  });
});
