// A local stand-in for Lambda's SQS event source: long-poll batches of the FIFO event queue,
// hand each message to the runtime, and settle each as settle.ts decides — delete what was
// handled (gathered across loops: delete-batcher.ts), hold what must wait in its group, re-send
// a long deferral into its own group, release what can never be handled to the dead-letter
// queue. While a cluster's API server is unavailable its messages are deferred; while every
// cluster's is, the poller stops receiving altogether.
import type { Message } from "@aws-sdk/client-sqs";
import { setTimeout as delay } from "node:timers/promises";
import type { Logger } from "pino";
import { backoffMs } from "../../core/backoff.ts";
import { fromSqsMessage } from "../../clients/queue-message.ts";
import type { Outcome } from "../runtime/outcome.ts";
import type { Runtime } from "../runtime/runtime.ts";
import type { Delivery } from "../runtime/delivery.ts";
import type { SqsClientSource } from "../runtime/sqs-client.ts";
import { DeleteBatcher } from "./delete-batcher.ts";
import { createCircuits, type Circuits } from "./settle.ts";
import { queueFacts, type QueueFacts } from "./queue-facts.ts";
import { DEFAULT_MAX_DEFER_SECONDS, DEFAULT_RETRY_BASE_SECONDS, resendRequest, settleBatch, settlementOf, type Settlement } from "./settle.ts";

export interface PollerOptions {
  /** The client (built on the first receive); `givenSqsClient` wraps one already built. */
  sqs: SqsClientSource;
  /** The queues to consume (one loop each; name a queue several times for concurrent loops). */
  queueUrls: string[];
  /** Judges each message once (receive) and handles what it received. */
  runtime: Pick<Runtime, "receive" | "handle">;
  /** 1–10. Default 10. */
  batchSize?: number;
  /** Long-poll wait, 0–20. Default 20. */
  waitTimeSeconds?: number;
  /**
   * Override the queue's visibility timeout for received messages. A batch in hand is extended
   * every half of it, so keep it well above a pause of the process (tens of seconds): once it
   * lapses, another loop or consumer receives a message that is still being handled.
   */
  visibilityTimeout?: number;
  logger: Logger;
  clock?: () => Date;
  /** Longest pause between probes while the API server is unavailable. Default 2 s. */
  maxProbeIntervalMs?: number;
  /** How long a handled message may wait to be deleted together with others (delete-batcher.ts). Default 50 ms. */
  deleteWindowMs?: number;
  /** A message deferred for an outage longer than this is left to the dead-letter queue. Default 6 h. */
  maxDeferSeconds?: number;
  /** Visibility of a failed message's first retry; doubles per receive. Default 5 s. */
  retryBaseSeconds?: number;
}

/** A received SQS message and what the runtime made of it. */
interface ReceivedMessage {
  message: Message;
  delivery: Delivery;
}

export interface Poller {
  /** Stops receiving, finishes the receive and the batch in hand, resolves when every loop has ended. */
  stop(): Promise<void>;
}

export function startPoller(opts: PollerOptions): Poller {
  const abort = new AbortController();
  const clock = opts.clock ?? (() => new Date());
  // A circuit per cluster, shared by every queue's loop: their work needs the same API servers.
  const circuits = createCircuits({ clock, logger: opts.logger, ...(opts.maxProbeIntervalMs === undefined ? {} : { maxMs: opts.maxProbeIntervalMs }) });
  const facts = queueFacts(opts.sqs);
  // One per queue, shared by that queue's loops: their deletes go out together.
  const deleters = new Map(
    [...new Set(opts.queueUrls)].map((queueUrl) => [
      queueUrl,
      new DeleteBatcher({ sqs: opts.sqs, queueUrl, windowMs: opts.deleteWindowMs ?? 50, logger: opts.logger }),
    ]),
  );
  const loops = opts.queueUrls.map((url) => pollLoop(url, { ...opts, clock, circuits, facts, deleter: deleters.get(url)! }, abort.signal));
  return {
    async stop() {
      abort.abort();
      await Promise.all(loops);
      await Promise.all([...deleters.values()].map((d) => d.drain()));
    },
  };
}

interface LoopOptions extends PollerOptions {
  clock: () => Date;
  circuits: Circuits;
  facts: (queueUrl: string) => Promise<QueueFacts>;
  deleter: DeleteBatcher;
}

async function pollLoop(queueUrl: string, opts: LoopOptions, signal: AbortSignal): Promise<void> {
  const log = opts.logger.child({ queue: queueUrl.split("/").pop() });
  let failures = 0;
  while (!signal.aborted) {
    // Every cluster's API server is down: stop receiving until one of them is due a probe.
    const paused = opts.circuits.waitMs();
    if (paused > 0) {
      await sleep(paused, signal);
      continue;
    }
    let messages: Message[];
    try {
      const { client, sdk } = await opts.sqs();
      const out = await client.send(
        new sdk.ReceiveMessageCommand({
          QueueUrl: queueUrl,
          MaxNumberOfMessages: opts.batchSize ?? 10,
          WaitTimeSeconds: opts.waitTimeSeconds ?? 20,
          ...(opts.visibilityTimeout === undefined ? {} : { VisibilityTimeout: opts.visibilityTimeout }),
          MessageSystemAttributeNames: ["ApproximateReceiveCount", "MessageGroupId"],
          MessageAttributeNames: ["All"],
        }),
        // Not aborted when stopping: an abandoned long poll is still answered by the queue, and a
        // message it takes then is hidden for the visibility timeout and spends a receive, with
        // nobody to handle it. Stopping waits for the answer (≤ WaitTimeSeconds) and handles it.
      );
      messages = out.Messages ?? [];
      failures = 0;
    } catch (error) {
      if (signal.aborted) return;
      // Queue outage: keep trying, with a capped backoff, so nothing is lost when it returns.
      const retryInMs = backoffMs(++failures, { initialMs: 250, maxMs: 5000 });
      log.warn({ error: (error as Error).message, retryInMs }, "receive failed");
      await sleep(retryInMs, signal);
      continue;
    }
    if (messages.length === 0) continue;
    const facts = await opts.facts(queueUrl);
    // Hidden for as long as they are handled, as Lambda's event source keeps them (its function
    // timeout is below the visibility timeout): a slow reconcile must not let its message be
    // received again, by another loop, while it still runs.
    const stopHeartbeat = heartbeat(queueUrl, messages, opts.visibilityTimeout ?? facts.visibilitySeconds ?? 30, opts.sqs, log);
    let settled;
    try {
      settled = await processBatch(messages, { ...opts, limit: facts.maxReceiveCount }, log);
    } finally {
      // Stopped (and its last extension landed) before the settlements set their own visibility.
      await stopHeartbeat();
    }
    await settle(queueUrl, settled, opts, log);
  }
}

/** One batch through the shared policy (settle.ts). */
async function processBatch(
  messages: Message[],
  opts: Pick<LoopOptions, "runtime" | "circuits" | "clock"> & { limit: number | undefined; maxDeferSeconds?: number; retryBaseSeconds?: number },
  log: Logger,
): Promise<Map<ReceivedMessage, { outcome: Outcome; settlement: Settlement }>> {
  // Each message judged once, here, before anything else: what follows gets the verified event.
  const received = messages.map((message) => ({ message, delivery: opts.runtime.receive(fromSqsMessage(message)) }));
  return settleBatch(received, {
    deliveryOf: (r) => r.delivery,
    groupOf: (r) => r.message.Attributes?.MessageGroupId,
    runtime: opts.runtime,
    circuits: opts.circuits,
    log,
    policy: (outcome, delivery) =>
      settlementOf(outcome, delivery.message, {
        limit: opts.limit,
        deferSeconds: () => opts.circuits.of(delivery.ok ? delivery.event.cluster : "").deferSeconds(),
        retryBaseSeconds: opts.retryBaseSeconds ?? DEFAULT_RETRY_BASE_SECONDS,
        maxDeferSeconds: opts.maxDeferSeconds ?? DEFAULT_MAX_DEFER_SECONDS,
        now: opts.clock().getTime(),
        log,
      }),
  });
}

/** Carries out each message's settlement on the queue. A failure here only means a redelivery. */
async function settle(queueUrl: string, settled: Map<ReceivedMessage, { settlement: Settlement }>, opts: LoopOptions, log: Logger): Promise<void> {
  const deletes: string[] = [];
  await Promise.all(
    [...settled].map(async ([{ message: m }, { settlement }]) => {
      const receipt = m.ReceiptHandle ?? "";
      try {
        const { client, sdk } = await opts.sqs();
        const visibility = (seconds: number) =>
          client.send(new sdk.ChangeMessageVisibilityCommand({ QueueUrl: queueUrl, ReceiptHandle: receipt, VisibilityTimeout: seconds }));
        switch (settlement.action) {
          case "delete":
            deletes.push(receipt);
            return;
          case "hold":
            await visibility(settlement.seconds);
            return;
          case "release":
            await visibility(0);
            return;
          case "resend":
            try {
              await client.send(new sdk.SendMessageCommand(resendRequest(queueUrl, m, settlement)));
              deletes.push(receipt);
            } catch (error) {
              log.warn({ messageId: m.MessageId, error: (error as Error).message }, "could not re-send the deferred message; holding it instead");
              await visibility(settlement.seconds);
            }
            return;
        }
      } catch (error) {
        log.warn({ messageId: m.MessageId, action: settlement.action, error: (error as Error).message }, "settling a message failed; it will be redelivered");
      }
    }),
  );
  opts.deleter.add(deletes);
}

/** Extends the batch's visibility every half of it until stopped. */
function heartbeat(queueUrl: string, messages: Message[], visibilitySeconds: number, sqs: SqsClientSource, log: Logger): () => Promise<void> {
  let last: Promise<unknown> = Promise.resolve();
  const timer = setInterval(
    () => {
      last = sqs()
        .then(({ client, sdk }) =>
          client.send(
            new sdk.ChangeMessageVisibilityBatchCommand({
              QueueUrl: queueUrl,
              Entries: messages.map((m, i) => ({ Id: String(i), ReceiptHandle: m.ReceiptHandle ?? "", VisibilityTimeout: visibilitySeconds })),
            }),
          ),
        )
        .catch((error: unknown) => log.warn({ error: (error as Error).message }, "could not extend the visibility of a batch in hand"));
    },
    (visibilitySeconds * 1000) / 2,
  );
  return async () => {
    clearInterval(timer);
    await last;
  };
}

/** Resolves after `ms`, or at once when stopping. */
const sleep = (ms: number, signal: AbortSignal): Promise<void> => delay(ms, undefined, { signal }).catch(() => undefined);
