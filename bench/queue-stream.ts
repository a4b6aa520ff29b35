// Messages through the local SQS stand-in as the bridge and the poller move them: sent in batches
// of ten, each in a FIFO group of its own (one object's stream), received ten at a time and deleted
// in a batch. bench:queuedepth measures ElasticMQ with it; bench:coldscale warms ElasticMQ's JVM
// with it before a timed run, so that no system's result depends on its place in the run.
import { DeleteMessageBatchCommand, ReceiveMessageCommand, SendMessageBatchCommand, type SQSClient } from "@aws-sdk/client-sqs";

/** One SendMessageBatch of messages `first` … `first + count - 1`, each in a group of its own. */
export function sendBatch(sqs: SQSClient, url: string, tag: string, first: number, count: number, body: string): Promise<unknown> {
  const entries = Array.from({ length: count }, (_, j) => ({
    Id: `m${j}`,
    MessageBody: body,
    MessageGroupId: `${tag}-${first + j}`,
    MessageDeduplicationId: `${tag}-${first + j}`,
  }));
  return sqs.send(new SendMessageBatchCommand({ QueueUrl: url, Entries: entries }));
}

/** One receive of up to ten, then one batch delete of what it took; how many that was. */
export async function takeBatch(sqs: SQSClient, url: string): Promise<number> {
  const got = (await sqs.send(new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: 10, WaitTimeSeconds: 1 }))).Messages ?? [];
  if (got.length > 0)
    await sqs.send(new DeleteMessageBatchCommand({ QueueUrl: url, Entries: got.map((m, i) => ({ Id: `d${i}`, ReceiptHandle: m.ReceiptHandle ?? "" })) }));
  return got.length;
}

/**
 * Streams n messages through the queue, at most `window` sent and not yet deleted (the bridge's
 * start window keeps it about this deep), four loops receiving and deleting as the local poller
 * does; `onTaken` hears the running count of messages deleted.
 */
export async function stream(
  sqs: SQSClient,
  url: string,
  n: number,
  o: { body: string; tag: string; window: number; onTaken?: (done: number) => void },
): Promise<void> {
  let sent = 0;
  let done = 0;
  const send = async (): Promise<void> => {
    while (sent < n) {
      if (sent - done >= o.window) {
        await new Promise((r) => setTimeout(r, 2));
        continue;
      }
      const first = sent;
      const count = Math.min(10, n - sent);
      sent += count;
      await sendBatch(sqs, url, o.tag, first, count, o.body);
    }
  };
  const take = async (): Promise<void> => {
    while (done < n) {
      // Awaited first: `done += await …` would add to the count read before the wait.
      const took = await takeBatch(sqs, url);
      done += took;
      o.onTaken?.(done);
    }
  };
  await Promise.all([send(), take(), take(), take(), take()]);
}
