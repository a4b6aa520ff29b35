// Positive signals that a pipeline is at rest, where a test used to sleep a fixed time and see
// that nothing happened (which proves little on a fast machine and flakes on a loaded one).
import { GetQueueAttributesCommand, ListQueuesCommand, type SQSClient } from "@aws-sdk/client-sqs";

/** Messages in a queue: visible, in flight (received, not yet deleted) and delayed. */
export async function queueDepth(sqs: SQSClient, queueUrl: string): Promise<number> {
  const out = await sqs.send(
    new GetQueueAttributesCommand({
      QueueUrl: queueUrl,
      AttributeNames: ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible", "ApproximateNumberOfMessagesDelayed"],
    }),
  );
  return Object.values(out.Attributes ?? {}).reduce((n, v) => n + Number(v), 0);
}

export interface Pipeline {
  sqs: SQSClient;
  queueUrl: string;
  /** The in-process bridge: what it holds to publish, and what it has scheduled. */
  bridge: { pendingCount(): number; scheduledCount(): number };
}

/**
 * Waits until the pipeline has nothing left to do: the queue holds no message (so no reconcile
 * runs: a message is deleted only after its reconcile's writes), the bridge holds nothing to
 * publish and has nothing scheduled — seen on two readings in a row, so that an echo the bridge
 * was publishing between them counts as work.
 */
export async function settled(p: Pipeline, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let before = false;
  for (;;) {
    const now = p.bridge.pendingCount() === 0 && p.bridge.scheduledCount() === 0 && (await queueDepth(p.sqs, p.queueUrl)) === 0;
    if (now && before) return;
    before = now;
    if (Date.now() > deadline)
      throw new Error(
        `the pipeline did not settle in ${timeoutMs} ms: ${p.bridge.pendingCount()} to publish, ${p.bridge.scheduledCount()} scheduled, ${await queueDepth(p.sqs, p.queueUrl)} in the queue`,
      );
    await new Promise((r) => setTimeout(r, 250));
  }
}

/**
 * For a pipeline seen from outside (crdfn dev as a subprocess): every queue of the server empty
 * on two readings a second apart, so a reconcile's echo published between them counts as work.
 */
export async function queuesAtRest(sqs: SQSClient, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let before = false;
  for (;;) {
    const urls = (await sqs.send(new ListQueuesCommand({}))).QueueUrls ?? [];
    const depths = await Promise.all(urls.map((url) => queueDepth(sqs, url)));
    const now = depths.every((d) => d === 0);
    if (now && before) return;
    before = now;
    if (Date.now() > deadline)
      throw new Error(`the queues did not come to rest in ${timeoutMs} ms: ${urls.map((u, i) => `${u.split("/").pop()} ${depths[i]}`).join(", ")}`);
    await new Promise((r) => setTimeout(r, 1000));
  }
}
