// The bridge's transport on AWS: SendMessageBatch to a FIFO queue, the object's stream as the
// MessageGroupId and uid + resourceVersion + cause as the MessageDeduplicationId (so a relist or
// a restart does not deliver one version twice).
import { GetQueueAttributesCommand, SendMessageBatchCommand, type SQSClient } from "@aws-sdk/client-sqs";
import { TransportError, type QueueTransport, type SendResult } from "./transport.ts";

/** SendMessageBatch takes 10 entries at most. */
const MAX_BATCH = 10;
/**
 * Each SendMessageBatch is a billed request, whatever it holds: part-filled batches go at most
 * one per this many ms on average, so under a faster stream a request carries several
 * (`npm run bench` at 50 changes/s: docs/performance.md).
 */
export const SQS_LINGER_MS = 40;

export function sqsTransport(sqs: SQSClient): QueueTransport {
  return {
    noun: "queue",
    maxBatch: MAX_BATCH,
    lingerMs: SQS_LINGER_MS,
    async send(queueUrl, messages) {
      let out;
      try {
        out = await sqs.send(
          new SendMessageBatchCommand({
            QueueUrl: queueUrl,
            Entries: messages.map((m, i) => ({ Id: `e${i}`, MessageBody: m.body, MessageGroupId: m.stream, MessageDeduplicationId: m.deduplicationId })),
          }),
        );
      } catch (e) {
        const err = e as Error & { $metadata?: { httpStatusCode?: number } };
        const missing = err.name === "QueueDoesNotExist" || err.name === "AWS.SimpleQueueService.NonExistentQueue";
        throw new TransportError(err.message, {
          reason: err.name,
          ...(err.$metadata?.httpStatusCode ? { status: err.$metadata.httpStatusCode } : {}),
          missing,
        });
      }
      const results: SendResult[] = messages.map(() => ({ ok: false, reason: "unanswered" }));
      for (const ok of out.Successful ?? []) {
        const i = Number(ok.Id?.slice(1));
        if (i >= 0 && i < results.length) results[i] = { ok: true };
      }
      for (const bad of out.Failed ?? []) {
        const i = Number(bad.Id?.slice(1));
        if (i >= 0 && i < results.length) results[i] = { ok: false, reason: bad.Code ?? "unknown" };
      }
      return results;
    },
    async exists(queueUrl, signal) {
      try {
        await sqs.send(new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: ["QueueArn"] }), { abortSignal: signal });
        return true;
      } catch (e) {
        const name = (e as Error).name;
        if (name === "QueueDoesNotExist" || name === "AWS.SimpleQueueService.NonExistentQueue") return false;
        // No sqs:GetQueueAttributes permission, the queue unreachable: the publisher's own retries cover it.
        return undefined;
      }
    },
    close: () => Promise.resolve(),
  };
}
