// A local stand-in for Lambda's SQS event source: long-poll batches, hand each message to the
// runtime, delete what succeeded, and leave failures to the visibility timeout so the queue's
// redrive policy (maxReceiveCount 5) dead-letters what keeps failing.
import {
  ChangeMessageVisibilityCommand,
  DeleteMessageBatchCommand,
  ReceiveMessageCommand,
  type Message,
  type SQSClient,
} from "@aws-sdk/client-sqs";
import { setTimeout as delay } from "node:timers/promises";
import type { Logger } from "pino";
import { backoffMs } from "../../core/backoff.ts";
import { fromSqsMessage, type QueueMessage } from "../../clients/queue-message.ts";
import { messageHandled, type Outcome } from "../runtime/outcome.ts";

export interface MessageHandler {
  handle(message: QueueMessage): Promise<Outcome>;
}

export interface PollerOptions {
  sqs: SQSClient;
  /** Every queue to consume: typically the FIFO event queue and the standard (requeue) queue. */
  queueUrls: string[];
  runtime: MessageHandler;
  /** 1–10. Default 10. */
  batchSize?: number;
  /** Long-poll wait, 0–20. Default 20. */
  waitTimeSeconds?: number;
  /** Override the queue's visibility timeout for received messages. */
  visibilityTimeout?: number;
  logger: Logger;
}

export interface Poller {
  /** Stops receiving, finishes the batch in hand, resolves when every loop has ended. */
  stop(): Promise<void>;
}

export function startPoller(opts: PollerOptions): Poller {
  const abort = new AbortController();
  const loops = opts.queueUrls.map((url) => pollLoop(url, opts, abort.signal));
  return {
    async stop() {
      abort.abort();
      await Promise.all(loops);
    },
  };
}

async function pollLoop(queueUrl: string, opts: PollerOptions, signal: AbortSignal): Promise<void> {
  const log = opts.logger.child({ queue: queueUrl.split("/").pop() });
  const fifo = queueUrl.endsWith(".fifo");
  let failures = 0;
  while (!signal.aborted) {
    let messages: Message[];
    try {
      const out = await opts.sqs.send(
        new ReceiveMessageCommand({
          QueueUrl: queueUrl,
          MaxNumberOfMessages: opts.batchSize ?? 10,
          WaitTimeSeconds: opts.waitTimeSeconds ?? 20,
          ...(opts.visibilityTimeout === undefined ? {} : { VisibilityTimeout: opts.visibilityTimeout }),
          MessageSystemAttributeNames: ["ApproximateReceiveCount", "MessageGroupId"],
          MessageAttributeNames: ["All"],
        }),
        { abortSignal: signal },
      );
      messages = out.Messages ?? [];
      failures = 0;
    } catch (error) {
      if (signal.aborted) return;
      // Queue outage: keep trying, with a capped backoff, so nothing is lost when it returns.
      const retryInMs = backoffMs(++failures, { initialMs: 250, maxMs: 5000 });
      log.warn({ error: (error as Error).message, retryInMs }, "receive failed");
      await delay(retryInMs, undefined, { signal }).catch(() => undefined); // an abort ends the wait
      continue;
    }
    if (messages.length === 0) continue;
    const outcomes = await processBatch(messages, fifo, opts.runtime, log);
    await settle(queueUrl, messages, outcomes, opts.sqs, log);
  }
}

/**
 * FIFO: each message group in order, groups in parallel; after a group's first failure the rest
 * of that group is not attempted (its order would break). Standard: everything in parallel.
 */
export async function processBatch(messages: Message[], fifo: boolean, runtime: MessageHandler, log: Logger): Promise<Map<string, Outcome>> {
  const outcomes = new Map<string, Outcome>();
  const groups = new Map<string, Message[]>();
  for (const m of messages) {
    const key = fifo ? (m.Attributes?.MessageGroupId ?? "") : (m.MessageId ?? "");
    groups.set(key, [...(groups.get(key) ?? []), m]);
  }
  await Promise.all(
    [...groups.values()].map(async (group) => {
      let failed = false;
      for (const m of group) {
        const id = m.MessageId ?? "";
        if (failed) {
          outcomes.set(id, { result: "retry", detail: "an earlier message of its group failed" });
          continue;
        }
        const outcome = await handleSafely(runtime, fromSqsMessage(m), log);
        outcomes.set(id, outcome);
        failed = !messageHandled(outcome);
      }
    }),
  );
  return outcomes;
}

async function handleSafely(runtime: MessageHandler, m: QueueMessage, log: Logger): Promise<Outcome> {
  try {
    return await runtime.handle(m);
  } catch (error) {
    log.error({ messageId: m.id, error: (error as Error).message }, "handler threw");
    return { result: "retry", detail: (error as Error).message };
  }
}

async function settle(queueUrl: string, messages: Message[], outcomes: Map<string, Outcome>, sqs: SQSClient, log: Logger): Promise<void> {
  const handled = messages.filter((m) => messageHandled(outcomes.get(m.MessageId ?? "") ?? { result: "retry", detail: "" }));
  try {
    if (handled.length > 0) {
      const out = await sqs.send(
        new DeleteMessageBatchCommand({
          QueueUrl: queueUrl,
          Entries: handled.map((m, i) => ({ Id: String(i), ReceiptHandle: m.ReceiptHandle ?? "" })),
        }),
      );
      // A failed delete only means a redelivery, which a level-triggered reconcile absorbs.
      for (const f of out.Failed ?? []) log.warn({ code: f.Code, message: f.Message }, "delete failed; the message will be redelivered");
    }
    // A bad message can never succeed: make it visible again at once, so its receives run out
    // quickly and the redrive policy moves it to the DLQ instead of blocking its FIFO group.
    for (const m of messages) {
      if (outcomes.get(m.MessageId ?? "")?.result !== "dead-letter") continue;
      await sqs.send(new ChangeMessageVisibilityCommand({ QueueUrl: queueUrl, ReceiptHandle: m.ReceiptHandle ?? "", VisibilityTimeout: 0 }));
    }
  } catch (error) {
    log.warn({ error: (error as Error).message }, "settling the batch failed; messages will be redelivered");
  }
}
