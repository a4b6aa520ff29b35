// A local stand-in for Lambda's SQS event source: long-poll batches, hand each message to the
// runtime, delete what succeeded (gathered across loops: delete-batcher.ts), and back failures
// off (outage.ts) so the queue's redrive policy (maxReceiveCount 5) dead-letters only what keeps
// failing for the object's own sake. While a cluster's API server is unavailable its messages
// are deferred; while every cluster's is, the poller stops receiving altogether.
import type { Message } from "@aws-sdk/client-sqs";
import { setTimeout as delay } from "node:timers/promises";
import type { Logger } from "pino";
import { backoffMs } from "../../core/backoff.ts";
import { fromSqsMessage, type QueueMessage } from "../../clients/queue-message.ts";
import { messageHandled, type Outcome } from "../runtime/outcome.ts";
import type { Requeuer } from "../runtime/requeue.ts";
import type { SqsClientSource } from "../runtime/sqs-client.ts";
import { DeleteBatcher } from "./delete-batcher.ts";
import { backOff, behind, createCircuits, deadLetterLimits, defer, report, type Circuits } from "./outage.ts";

export interface MessageHandler {
  handle(message: QueueMessage): Promise<Outcome>;
}

export interface PollerOptions {
  /** The client (built on the first receive); `givenSqsClient` wraps one already built. */
  sqs: SqsClientSource;
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
  /** Where "unavailable" messages are deferred to (the standard queue); without it they wait out a visibility timeout. */
  requeuer?: Requeuer;
  clock?: () => Date;
  /** Longest pause between probes while the API server is unavailable. Default 10 s. */
  maxProbeIntervalMs?: number;
  /** How long a handled message may wait to be deleted together with others (delete-batcher.ts). Default 50 ms. */
  deleteWindowMs?: number;
}

export interface Poller {
  /** Stops receiving, finishes the batch in hand, resolves when every loop has ended. */
  stop(): Promise<void>;
}

export function startPoller(opts: PollerOptions): Poller {
  const abort = new AbortController();
  const clock = opts.clock ?? (() => new Date());
  // A circuit per cluster, shared by every queue's loop: their work needs the same API servers.
  const circuits = createCircuits({ clock, logger: opts.logger, ...(opts.maxProbeIntervalMs === undefined ? {} : { maxMs: opts.maxProbeIntervalMs }) });
  const limits = deadLetterLimits(opts.sqs);
  // One per queue, shared by that queue's loops: their deletes go out together.
  const deleters = new Map(
    [...new Set(opts.queueUrls)].map((queueUrl) => [queueUrl, new DeleteBatcher({ sqs: opts.sqs, queueUrl, windowMs: opts.deleteWindowMs ?? 50, logger: opts.logger })]),
  );
  const loops = opts.queueUrls.map((url) => pollLoop(url, { ...opts, clock, circuits, limits, deleter: deleters.get(url)! }, abort.signal));
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
  limits: (queueUrl: string) => Promise<number | undefined>;
  deleter: DeleteBatcher;
}

async function pollLoop(queueUrl: string, opts: LoopOptions, signal: AbortSignal): Promise<void> {
  const log = opts.logger.child({ queue: queueUrl.split("/").pop() });
  const fifo = queueUrl.endsWith(".fifo");
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
        { abortSignal: signal },
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
    const outcomes = await processBatch(messages, fifo, opts.runtime, log, opts.circuits);
    await settle(queueUrl, messages, outcomes, opts, log);
  }
}

/**
 * FIFO: each message group in order, groups in parallel; after a group's first failure the rest
 * of that group is not attempted (see `behind`). Standard: everything in parallel.
 */
export async function processBatch(messages: Message[], fifo: boolean, runtime: MessageHandler, log: Logger, circuits?: Circuits): Promise<Map<string, Outcome>> {
  const outcomes = new Map<string, Outcome>();
  const groups = new Map<string, Message[]>();
  for (const m of messages) {
    const key = fifo ? (m.Attributes?.MessageGroupId ?? "") : (m.MessageId ?? "");
    groups.set(key, [...(groups.get(key) ?? []), m]);
  }
  await Promise.all(
    [...groups.values()].map(async (group) => {
      let previous: Outcome | undefined;
      for (const m of group) {
        const id = m.MessageId ?? "";
        const message = fromSqsMessage(m);
        // While its cluster's circuit is open a message is deferred untried, except the one probe.
        const circuit = circuits?.of(message);
        const admission = circuit?.admit() ?? "closed";
        const instead = typeof admission === "number" ? behind({ result: "unavailable" }) : behind(previous);
        if (instead) {
          if (admission === "probe") circuit?.release();
          outcomes.set(id, instead);
          continue;
        }
        const outcome = await handleSafely(runtime, message, log);
        outcomes.set(id, outcome);
        if (circuit) report(circuit, outcome);
        previous = outcome;
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

async function settle(queueUrl: string, messages: Message[], outcomes: Map<string, Outcome>, opts: LoopOptions, log: Logger): Promise<void> {
  const outcomeOf = (m: Message): Outcome => outcomes.get(m.MessageId ?? "") ?? { result: "retry", detail: "no outcome" };
  const deferred = new Set<Message>();
  await Promise.all(
    messages
      .filter((m) => outcomeOf(m).result === "unavailable")
      .map(async (m) => {
        if (await defer(fromSqsMessage(m), opts.requeuer, opts.circuits.of(fromSqsMessage(m)).deferSeconds(), opts.clock, log)) deferred.add(m);
      }),
  );
  opts.deleter.add(messages.filter((m) => messageHandled(outcomeOf(m)) || deferred.has(m)).map((m) => m.ReceiptHandle ?? ""));
  try {
    // A bad message can never succeed: make it visible again at once, so its receives run out
    // quickly and the redrive policy moves it to the DLQ instead of blocking its FIFO group.
    for (const m of messages) {
      const outcome = outcomeOf(m);
      if (outcome.result === "dead-letter") {
        const { client, sdk } = await opts.sqs();
        await client.send(new sdk.ChangeMessageVisibilityCommand({ QueueUrl: queueUrl, ReceiptHandle: m.ReceiptHandle ?? "", VisibilityTimeout: 0 }));
      } else if (outcome.result === "retry") {
        const hint = (outcome as { delaySeconds?: number }).delaySeconds;
        await backOff(opts.sqs, queueUrl, { ...fromSqsMessage(m), receiptHandle: m.ReceiptHandle ?? "" }, outcome.detail, { baseSeconds: opts.visibilityTimeout ?? 30 }, await opts.limits(queueUrl), log, hint);
      }
    }
  } catch (error) {
    log.warn({ error: (error as Error).message }, "settling the batch failed; messages will be redelivered");
  }
}

/** Resolves after `ms`, or at once when stopping. */
const sleep = (ms: number, signal: AbortSignal): Promise<void> => delay(ms, undefined, { signal }).catch(() => undefined);
