// Positive signals that a pipeline is at rest, where a test used to sleep a fixed time and see
// that nothing happened (which proves little on a fast machine and flakes on a loaded one).
import { GetQueueAttributesCommand, ListQueuesCommand, type SQSClient } from "@aws-sdk/client-sqs";
import type { Registry } from "prom-client";

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
  /** The in-process bridge: what it holds to publish, what it has scheduled, and its metrics (the events it observed). */
  bridge: { pendingCount(): number; scheduledCount(): number; registry?: Registry };
}

/** Events the bridge observed (every child a reconcile writes is one): progress while the queue's depth stands still. */
async function observed(p: Pipeline): Promise<number> {
  const values = (await p.bridge.registry?.getSingleMetric("crdfn_bridge_events_observed_total")?.get())?.values ?? [];
  return values.reduce((n, v) => n + v.value, 0);
}

/**
 * Waits until the pipeline has nothing left to do: the queue holds no message (so no reconcile
 * runs: a message is deleted only after its reconcile's writes), the bridge holds nothing to
 * publish and has nothing scheduled — seen on two readings in a row, so that an echo the bridge
 * was publishing between them counts as work.
 *
 * `stallMs` bounds a wait without progress, not the wait: a loaded machine (CI runs at 4× its
 * cores) is slower, not stuck, so any change in what is left (to publish, scheduled, queued) or in
 * what the bridge observed starts the bound again. The test's own timeout bounds the whole.
 */
export async function settled(p: Pipeline, stallMs = 60_000): Promise<void> {
  let before = false;
  let progress = "";
  let since = Date.now();
  for (;;) {
    const depth = await queueDepth(p.sqs, p.queueUrl);
    const left = [p.bridge.pendingCount(), p.bridge.scheduledCount(), depth];
    const now = left.every((n) => n === 0);
    if (now && before) return;
    before = now;
    const mark = `${left.join(",")}/${await observed(p)}`;
    if (mark !== progress) [progress, since] = [mark, Date.now()];
    else if (Date.now() - since > stallMs)
      throw new Error(`the pipeline made no progress in ${stallMs} ms and did not settle: ${left[0]} to publish, ${left[1]} scheduled, ${depth} in the queue`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/**
 * For a pipeline seen from outside (crdfn dev as a subprocess): every queue of the server empty
 * on two readings a second apart, so a reconcile's echo published between them counts as work.
 * `stallMs` bounds a wait without progress (no queue's depth changed), as settled()'s does.
 */
export async function queuesAtRest(sqs: SQSClient, stallMs = 60_000): Promise<void> {
  let before = false;
  let progress = "";
  let since = Date.now();
  for (;;) {
    const urls = (await sqs.send(new ListQueuesCommand({}))).QueueUrls ?? [];
    const depths = await Promise.all(urls.map((url) => queueDepth(sqs, url)));
    const now = depths.every((d) => d === 0);
    if (now && before) return;
    before = now;
    const shown = urls.map((u, i) => `${u.split("/").pop()} ${depths[i]}`).join(", ");
    if (shown !== progress) [progress, since] = [shown, Date.now()];
    else if (Date.now() - since > stallMs) throw new Error(`the queues made no progress in ${stallMs} ms and did not come to rest: ${shown}`);
    await new Promise((r) => setTimeout(r, 1000));
  }
}
