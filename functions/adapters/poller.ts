// A local stand-in for Lambda's SQS event source: long-poll batches of the FIFO event queue,
// hand each message to the runtime, and settle each as settle.ts decides — delete what was
// handled (gathered across loops: delete-batcher.ts), hold what must wait in its group, re-send
// a long deferral into its own group, release what can never be handled to the dead-letter
// queue. Each message stays hidden, and one object is handled once at a time, until its
// settlement has landed, however long its reconcile takes (leases.ts). While a cluster's API server is unavailable its messages are deferred; while every
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
import { Leases, type Lease } from "./leases.ts";
import { DEFAULT_MAX_DEFER_SECONDS, DEFAULT_RETRY_BASE_SECONDS, resendRequest, settleBatch, settlementOf, type Settlement } from "./settle.ts";
import { createCircuits, type Circuits } from "./circuit.ts";
import { queueFacts, type QueueFacts } from "./queue-facts.ts";

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
   * Override the queue's visibility timeout for received messages. A message in hand is extended
   * every third of it until settled; one this poller receives again after a lapse (a pause of the
   * process longer than two thirds of it) is recognised and not handled twice, but another
   * consumer of the queue would handle it: keep it well above a pause of the process.
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

/** A received SQS message, its lease, and what the runtime made of it. */
interface ReceivedMessage {
  message: Message;
  lease: Lease;
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
  // One per queue, shared by that queue's loops: their deletes go out together, and a message
  // one loop has in hand is known to the others.
  const queues = new Map(
    [...new Set(opts.queueUrls)].map((queueUrl) => [
      queueUrl,
      {
        deleter: new DeleteBatcher({ sqs: opts.sqs, queueUrl, windowMs: opts.deleteWindowMs ?? 50, logger: opts.logger }),
        leases: new Leases({ sqs: opts.sqs, queueUrl, logger: opts.logger }),
      },
    ]),
  );
  const loops = opts.queueUrls.map((url) => pollLoop(url, { ...opts, clock, circuits, facts, ...queues.get(url)! }, abort.signal));
  return {
    async stop() {
      abort.abort();
      await Promise.all(loops);
      await Promise.all([...queues.values()].map((q) => q.deleter.drain()));
      for (const q of queues.values()) q.leases.close();
    },
  };
}

interface LoopOptions extends PollerOptions {
  clock: () => Date;
  circuits: Circuits;
  facts: (queueUrl: string) => Promise<QueueFacts>;
  deleter: DeleteBatcher;
  leases: Leases;
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
    // Until what it brings is taken, a refused receipt handle of a message in hand is judged
    // after it: its answer may hold that message's new one (leases.ts renewal).
    const landed = opts.leases.receiving();
    let facts: QueueFacts;
    let taken: Array<{ message: Message; lease: Lease }>;
    try {
      const messages = await receive(queueUrl, opts);
      failures = 0;
      if (messages.length === 0) continue;
      facts = await opts.facts(queueUrl);
      // Hidden until settled: a slow reconcile must not let its message be handled again, by
      // another loop, while it still runs (Lambda's event source has the deployed rule instead:
      // visibility ≥ 6 × the function timeout). What this loop received while another loop has it
      // in hand stays with that loop.
      taken = opts.leases.take(messages, opts.visibilityTimeout ?? facts.visibilitySeconds ?? 30);
    } catch (error) {
      landed();
      if (signal.aborted) return;
      // Queue outage: keep trying, with a capped backoff, so nothing is lost when it returns.
      const retryInMs = backoffMs(++failures, { initialMs: 250, maxMs: 5000 });
      log.warn({ error: (error as Error).message, retryInMs }, "receive failed");
      await sleep(retryInMs, signal);
      continue;
    } finally {
      landed();
    }
    if (taken.length === 0) continue;
    let settled;
    try {
      settled = await processBatch(taken, { ...opts, limit: facts.maxReceiveCount }, log);
    } catch (error) {
      // Nothing was settled: each message comes back once its visibility (no longer extended) runs out.
      for (const { lease } of taken) opts.leases.release(lease);
      throw error;
    }
    for (const { lease } of taken) lease.endHandling();
    await settle(queueUrl, settled, opts, log);
  }
}

/** One long poll of the queue. */
async function receive(queueUrl: string, opts: LoopOptions): Promise<Message[]> {
  const { client, sdk } = await opts.sqs();
  const out = await client.send(
    new sdk.ReceiveMessageCommand({
      QueueUrl: queueUrl,
      MaxNumberOfMessages: opts.batchSize ?? 10,
      WaitTimeSeconds: opts.waitTimeSeconds ?? 20,
      ...(opts.visibilityTimeout === undefined ? {} : { VisibilityTimeout: opts.visibilityTimeout }),
      MessageSystemAttributeNames: ["ApproximateReceiveCount", "MessageGroupId", "SentTimestamp"],
      MessageAttributeNames: ["All"],
    }),
    // Not aborted when stopping: an abandoned long poll is still answered by the queue, and a
    // message it takes then is hidden for the visibility timeout and spends a receive, with
    // nobody to handle it. Stopping waits for the answer (≤ WaitTimeSeconds) and handles it.
  );
  return out.Messages ?? [];
}

/** One batch through the shared policy (settle.ts). */
async function processBatch(
  taken: ReadonlyArray<{ message: Message; lease: Lease }>,
  opts: Pick<LoopOptions, "runtime" | "circuits" | "clock" | "leases"> & { limit: number | undefined; maxDeferSeconds?: number; retryBaseSeconds?: number },
  log: Logger,
): Promise<Map<ReceivedMessage, { outcome: Outcome; settlement: Settlement }>> {
  // Each message judged once, here, before anything else: what follows gets the verified event.
  const received = taken.map(({ message, lease }) => ({ message, lease, delivery: opts.runtime.receive(fromSqsMessage(message)) }));
  const leaseOf = new Map(received.map((r) => [r.delivery, r.lease]));
  return settleBatch(received, {
    deliveryOf: (r) => r.delivery,
    groupOf: (r) => r.message.Attributes?.MessageGroupId,
    // An object's earlier message in another loop's hand is handled first, never beside this one.
    runtime: {
      async handle(delivery) {
        const lease = leaseOf.get(delivery);
        if (lease) await opts.leases.turn(lease);
        try {
          return await opts.runtime.handle(delivery);
        } finally {
          lease?.endHandling();
        }
      },
    },
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

/**
 * Carries out each message's settlement on the queue, and lets each out of hand once it has
 * landed. A failure here only means a redelivery.
 */
async function settle(queueUrl: string, settled: Map<ReceivedMessage, { settlement: Settlement }>, opts: LoopOptions, log: Logger): Promise<void> {
  const deletes: Lease[] = [];
  for (const [{ lease }, { settlement }] of settled) lease.settling = settlement.action === "hold" || settlement.action === "release" ? "visibility" : "delete";
  // An extension under way must not land after a visibility set here, and undo it.
  await opts.leases.extensionsLanded();
  await Promise.all(
    [...settled].map(async ([{ message: m, lease }, { settlement }]) => {
      try {
        const { client, sdk } = await opts.sqs();
        const visibility = (seconds: number) =>
          withLatestReceipt(lease, (receipt) =>
            client.send(new sdk.ChangeMessageVisibilityCommand({ QueueUrl: queueUrl, ReceiptHandle: receipt, VisibilityTimeout: seconds })),
          );
        switch (settlement.action) {
          case "delete":
            deletes.push(lease);
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
              deletes.push(lease);
            } catch (error) {
              log.warn({ messageId: m.MessageId, error: (error as Error).message }, "could not re-send the deferred message; holding it instead");
              lease.settling = "visibility";
              await visibility(settlement.seconds);
            }
            return;
        }
      } catch (error) {
        log.warn({ messageId: m.MessageId, action: settlement.action, error: (error as Error).message }, "settling a message failed; it will be redelivered");
      } finally {
        // Its own visibility is set (or could not be): out of hand. A delete is, once answered.
        if (!deletes.includes(lease)) opts.leases.release(lease);
      }
    }),
  );
  // Not awaited: the loop receives again while its deletes wait for others (delete-batcher.ts);
  // they are in hand, and extended, until answered.
  void opts.deleter.add(deletes).then(() => {
    for (const lease of deletes) opts.leases.release(lease);
  });
}

/**
 * Sets a message's visibility with its latest receipt handle: again with the new one if it was
 * received again meanwhile (judged once the receives under way have been taken).
 */
async function withLatestReceipt(lease: Lease, send: (receipt: string) => Promise<unknown>): Promise<void> {
  const receipt = lease.receipt;
  try {
    await send(receipt);
  } catch (error) {
    if (lease.receipt === receipt) await lease.renewal();
    if (lease.receipt === receipt) throw error;
    await send(lease.receipt);
  }
}

/** Resolves after `ms`, or at once when stopping. */
const sleep = (ms: number, signal: AbortSignal): Promise<void> => delay(ms, undefined, { signal }).catch(() => undefined);
