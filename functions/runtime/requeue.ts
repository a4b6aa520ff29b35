// Durable delayed re-delivery ("reconcile again in N seconds"), designed around two SQS facts:
//  * FIFO queues refuse per-message DelaySeconds, and
//  * holding the current message with its visibility timeout counts as a receive, so an object
//    that asks to be requeued a few times would end up in the dead-letter queue.
// So a requeue is a NEW key event (reason "requeue" or "retry") sent to the STANDARD queue with
// DelaySeconds ≤ 900, and the current message is deleted. The functions consume both queues.
// Longer delays chain: the due time rides in a message attribute (not the contract body); a
// message received before it is due is re-sent with the remaining delay and deleted.
// Ordering does not matter for these: the event only names the object; the reconcile reads it fresh.
import { encodeKeyEvent, type KeyEvent } from "../../core/event.ts";
import { DUE_AT_ATTRIBUTE } from "./message.ts";
import type { SqsClientSource } from "./sqs-client.ts";

/** SQS's largest DelaySeconds. */
export const MAX_SQS_DELAY_SECONDS = 900;

export interface Requeuer {
  /** Delivers `event` again no earlier than `dueAtMs`. */
  schedule(event: KeyEvent, dueAtMs: number): Promise<void>;
}

export function createSqsRequeuer(opts: { sqs: SqsClientSource; queueUrl: string; clock: () => Date }): Requeuer {
  return {
    async schedule(event, dueAtMs) {
      const { client, sdk } = await opts.sqs();
      const remaining = Math.ceil((dueAtMs - opts.clock().getTime()) / 1000);
      await client.send(
        new sdk.SendMessageCommand({
          QueueUrl: opts.queueUrl,
          MessageBody: encodeKeyEvent(event),
          DelaySeconds: Math.min(MAX_SQS_DELAY_SECONDS, Math.max(0, remaining)),
          MessageAttributes: { [DUE_AT_ATTRIBUTE]: { DataType: "Number", StringValue: String(dueAtMs) } },
        }),
      );
    },
  };
}
