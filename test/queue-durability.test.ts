// The emulator's queue keeps what it acknowledged: ElasticMQ SIGKILLed right after the last
// send returned loses none of the messages (H2 writes each commit; see emulator/elasticmq.ts).
// Only a benchmark's stand-in for SQS runs it in memory (queueStorage "memory"), and a restart
// then empties it: the contrast shows which store each one runs with.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { DeleteMessageBatchCommand, ReceiveMessageCommand, SendMessageBatchCommand, type SQSClient } from "@aws-sdk/client-sqs";
import { startCluster, type LocalCluster } from "../emulator/cluster.ts";
import { sqsClient } from "../clients/sqs-client.ts";

const MESSAGES = 300;

describe("queue durability", { timeout: 180_000 }, () => {
  let cluster: LocalCluster;
  let sqs: SQSClient;
  before(async () => {
    cluster = await startCluster({ controllerManager: false, log: () => {} });
    sqs = sqsClient(cluster.sqs, { maxAttempts: 1 });
  });
  after(async () => {
    sqs?.destroy();
    await cluster?.stop();
  });

  it(`SIGKILL right after ${MESSAGES} acknowledged sends: all of them are there after the restart`, async () => {
    const started = Date.now();
    await sendAll(sqs, cluster.sqs.queues.fifo, MESSAGES);
    console.log(`# ${MESSAGES} sends acknowledged in ${Date.now() - started} ms`);
    await cluster.queue.stop(0);
    await cluster.queue.start();
    const seen = await receiveAll(sqs, cluster.sqs.queues.fifo);
    assert.equal(seen.size, MESSAGES, `${MESSAGES - seen.size} acknowledged messages lost`);
  });
});

describe("a benchmark's queue in memory", { timeout: 180_000 }, () => {
  let cluster: LocalCluster;
  let sqs: SQSClient;
  before(async () => {
    cluster = await startCluster({ controllerManager: false, queueStorage: "memory", log: () => {} });
    sqs = sqsClient(cluster.sqs, { maxAttempts: 1 });
  });
  after(async () => {
    sqs?.destroy();
    await cluster?.stop();
  });

  it("serves the queues, and a restart empties them", async () => {
    await sendAll(sqs, cluster.sqs.queues.fifo, 20);
    await cluster.queue.stop(0);
    await cluster.queue.start();
    assert.equal((await receiveAll(sqs, cluster.sqs.queues.fifo)).size, 0);
    await sendAll(sqs, cluster.sqs.queues.fifo, 20);
    assert.equal((await receiveAll(sqs, cluster.sqs.queues.fifo)).size, 20);
  });
});

async function sendAll(sqs: SQSClient, url: string, n: number): Promise<void> {
  for (let i = 0; i < n; i += 10) {
    const out = await sqs.send(
      new SendMessageBatchCommand({
        QueueUrl: url,
        Entries: Array.from({ length: 10 }, (_, j) => ({
          Id: String(j),
          MessageBody: `m${i + j}`,
          MessageGroupId: `g${j}`,
          MessageDeduplicationId: `m${i + j}`,
        })),
      }),
    );
    assert.equal(out.Failed?.length ?? 0, 0);
  }
}

/** Every message's body, each deleted once received, until two receives in a row come back empty. */
async function receiveAll(sqs: SQSClient, url: string): Promise<Set<string>> {
  const seen = new Set<string>();
  for (let empty = 0; empty < 2;) {
    const out = await sqs.send(new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: 10, VisibilityTimeout: 120, WaitTimeSeconds: 0 }));
    const got = out.Messages ?? [];
    empty = got.length === 0 ? empty + 1 : 0;
    for (const m of got) seen.add(m.Body ?? "");
    // FIFO hides a group while one of its messages is in flight: take them out as they come.
    if (got.length > 0)
      await sqs.send(new DeleteMessageBatchCommand({ QueueUrl: url, Entries: got.map((m, i) => ({ Id: String(i), ReceiptHandle: m.ReceiptHandle ?? "" })) }));
  }
  return seen;
}
