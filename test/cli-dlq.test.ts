// `crdfn dlq redrive` empties the dead-letter queue in one run, FIFO groups with several dead
// letters included (a FIFO queue hands out one message per group while one is in flight).
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { GetQueueAttributesCommand, SendMessageCommand, type SQSClient } from "@aws-sdk/client-sqs";
import { redrive } from "../cli/dlq.ts";
import { encodeKeyEvent } from "../core/event.ts";
import { sqsClient, startCluster, type LocalCluster } from "../emulator/cluster.ts";

describe("dlq redrive", { timeout: 120_000 }, () => {
  let cluster: LocalCluster;
  let sqs: SQSClient;
  before(async () => {
    cluster = await startCluster({ controllerManager: false, log: () => {} });
    sqs = sqsClient(cluster.sqs);
  });
  after(async () => {
    sqs?.destroy();
    await cluster?.stop();
  });
  const visible = async (url: string): Promise<number> =>
    Number((await sqs.send(new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ["ApproximateNumberOfMessages"] }))).Attributes?.ApproximateNumberOfMessages);

  it("moves every message of every group in one run and says what it moved", async () => {
    const { fifo, fifoDlq } = cluster.sqs.queues;
    for (let g = 0; g < 5; g++) {
      for (let i = 0; i < 3; i++) {
        const event = { v: 1, cluster: "c", group: "example.com", version: "v1", plural: "greetings", kind: "Greeting", namespace: "ns", name: `g${g}`, uid: "u", resourceVersion: String(i + 1), generation: 1, type: "MODIFIED", observedAt: new Date().toISOString() } as const;
        await sqs.send(new SendMessageCommand({ QueueUrl: fifoDlq, MessageBody: encodeKeyEvent(event), MessageGroupId: `group-${g}`, MessageDeduplicationId: `d-${g}-${i}` }));
      }
    }
    const moved = await redrive(sqs, fifoDlq, fifo, 1000);
    assert.equal(moved.count, 15);
    assert.deepEqual([...moved.byKind], [["Greeting", 15]]);
    assert.equal(await visible(fifoDlq), 0, "the dead-letter queue is empty");
    assert.equal(await visible(fifo), 15);
  });
});
