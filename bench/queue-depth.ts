// Waits for the event queues to empty, so each phase starts from a quiet pipeline: creating N
// objects leaves N more events behind the N reconciles (each new child announces its parent).
import { GetQueueAttributesCommand, type SQSClient } from "@aws-sdk/client-sqs";

async function depth(sqs: SQSClient, url: string): Promise<number> {
  const a =
    (await sqs.send(new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"] })))
      .Attributes ?? {};
  return Number(a.ApproximateNumberOfMessages ?? 0) + Number(a.ApproximateNumberOfMessagesNotVisible ?? 0);
}

/** Resolves with the seconds waited once every queue has been empty twice in a row (200 ms apart); throws after `timeoutMs`. */
export async function untilQueuesEmpty(sqs: SQSClient, urls: readonly string[], timeoutMs: number): Promise<number> {
  const started = performance.now();
  let emptyPolls = 0;
  while (emptyPolls < 2) {
    const total = (await Promise.all(urls.map((u) => depth(sqs, u)))).reduce((a, b) => a + b, 0);
    emptyPolls = total === 0 ? emptyPolls + 1 : 0;
    if (performance.now() - started > timeoutMs) throw new Error(`the event queues still held ${total} messages after ${timeoutMs / 1000} s`);
    if (emptyPolls < 2) await new Promise((r) => setTimeout(r, 200));
  }
  return Math.round((performance.now() - started) / 100) / 10;
}
