// What becomes of each message of a batch: ONE policy, shared by Lambda's adapter, the local
// poller and the push adapter, which differ only in how they carry it out (lambda.ts, poller.ts,
// push.ts). Each message comes judged once (the runtime's receive: delivery.ts).
//
// Every re-delivery of an object stays in its own FIFO group, so at most one reconcile of an
// object runs at a time: a failure the object can record was recorded on it and the message is
// done (the bridge re-announces the object when due); what is held is held IN its group (its
// visibility), and a deferral that would run out the message's receives re-sends it INTO its
// group (behind whatever waits there) instead of onto a side queue.
//
// An outage of the API server never spends a message's dead-letter budget, while a failure of
// the object itself is recorded on the object:
//  * a circuit per cluster (circuit.ts): while a cluster's API server is down its messages are
//    deferred untried (below), and a message that finds its circuit probing waits in its batch,
//    up to ADMISSION_WAIT_MS, for the probe's answer.
import { createHash } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import type { Logger } from "pino";
import { DEFERRAL_MAC_ATTRIBUTE, DEFERRALS_ATTRIBUTE, DEFERRED_SINCE_ATTRIBUTE, type Delivery, type QueueMessage } from "../runtime/delivery.ts";
import { messageHandled, type Outcome } from "../runtime/outcome.ts";
import { backoffMs } from "../../core/backoff.ts";
import { report, type Circuit, type Circuits } from "./circuit.ts";

export { DEFERRAL_MAC_ATTRIBUTE, DEFERRALS_ATTRIBUTE, DEFERRED_SINCE_ATTRIBUTE };

/** Six hours: longer than any outage worth riding out unattended, far shorter than SQS's retention (4 days by default). */
export const DEFAULT_MAX_DEFER_SECONDS = 6 * 3600;
/** A message fails only when its object cannot record why, which rarely mends itself in seconds. */
export const DEFAULT_RETRY_BASE_SECONDS = 5;

export type Settlement =
  /** Handled, or superseded by a message of its group held before it: delete it. */
  | { action: "delete" }
  /** Leave it in its group, visible again after `seconds` (this receive counts towards the dead-letter limit). */
  | { action: "hold"; seconds: number }
  /**
   * Deferred with a fresh receive budget: a copy goes into its own group, this one is deleted.
   * `attributes`: the copy's deferral attributes with their MAC (delivery.ts), set by settleBatch.
   */
  | { action: "resend"; since: number; deferrals: number; seconds: number; attributes?: Record<string, string> }
  /** Visible again now: it can never be handled, and the redrive policy moves it to the dead-letter queue. */
  | { action: "release" };

export interface SettlePolicy {
  /** The queue's maxReceiveCount; undefined when unknown (then a deferral is never re-sent). */
  limit: number | undefined;
  /** How long a message deferred for an outage waits before it is tried again. */
  deferSeconds: () => number;
  /** Visibility of a failed message's first retry; doubles per receive. */
  retryBaseSeconds: number;
  /** Longest visibility of a retry. Default 900. */
  retryMaxSeconds?: number;
  /** A message deferred for longer than this is left to the dead-letter queue. */
  maxDeferSeconds: number;
  now: number;
  log: Logger;
}

/** One message's outcome → what to do with it. */
export function settlementOf(outcome: Outcome, message: QueueMessage, p: SettlePolicy): Settlement {
  if (messageHandled(outcome)) return { action: "delete" };
  const receives = message.receiveCount ?? 1;
  const last = p.limit !== undefined && receives >= p.limit;
  const id = { messageId: message.id, receiveCount: receives, maxReceiveCount: p.limit };
  if (outcome.result === "dead-letter") return { action: "release" };
  if (outcome.result === "unavailable") {
    const since = Number(message.attributes?.[DEFERRED_SINCE_ATTRIBUTE] ?? "") || p.now;
    if (p.now - since > p.maxDeferSeconds * 1000) {
      p.log.error(
        { ...id, deferredSeconds: Math.round((p.now - since) / 1000) },
        "deferred for longer than the limit while the API server is unavailable; leaving it to the dead-letter queue (redrive it once the API server is back)",
      );
      return { action: "release" };
    }
    const seconds = p.deferSeconds();
    // Holding it once more would spend its last receive: a fresh copy in its group instead.
    if (p.limit !== undefined && receives >= p.limit - 1)
      return { action: "resend", since, deferrals: Number(message.attributes?.[DEFERRALS_ATTRIBUTE] ?? "0") + 1, seconds };
    return { action: "hold", seconds };
  }
  // retry: the object could not record its failure, or the runtime could not finish.
  if (last) {
    p.log.error({ ...id, error: outcome.detail }, "reconcile failed on the message's last receive; the queue moves it to the dead-letter queue now");
    return { action: "release" };
  }
  const seconds = Math.round(backoffMs(receives, { initialMs: p.retryBaseSeconds * 1000, maxMs: (p.retryMaxSeconds ?? 900) * 1000 }) / 1000);
  p.log.info({ ...id, retryInSeconds: seconds }, "retrying with backoff");
  return { action: "hold", seconds };
}

/** Whether a settlement keeps the object's work pending in its group (the rest of the group is then redundant). */
const holdsTheGroup = (s: Settlement): boolean => s.action === "hold" || s.action === "resend";

export interface BatchHandler {
  handle(delivery: Delivery): Promise<Outcome>;
}

export interface BatchOptions<M> {
  /** The item as a received message, judged once by the runtime (delivery.ts). */
  deliveryOf: (item: M) => Delivery;
  groupOf: (item: M) => string | undefined;
  runtime: BatchHandler;
  circuits?: Circuits;
  policy: (outcome: Outcome, delivery: Delivery) => Settlement;
  log: Logger;
  /** How a message waits for its circuit (tests pass one that returns at once). Default: a timer. */
  pause?: (ms: number) => Promise<unknown>;
  /**
   * Whether a message may still be started: false once too little of the invocation's time is
   * left for a reconcile to finish (Lambda's function timeout), so that what is not started is
   * deferred and settled, not cut off by the timeout with a receive spent. Default: always.
   */
  startable?: () => boolean;
}

/** The longest a message waits in its batch for its circuit's probe to answer before it is deferred. */
export const ADMISSION_WAIT_MS = 2500;

/**
 * Runs a batch: each FIFO group in order, groups in parallel (a group is one object: core/event.ts
 * messageGroupId). While a cluster's circuit is open its messages are deferred untried (but for
 * one probe, whose answer the others wait for, briefly). Behind a message that stays pending in
 * its group the rest of that group is deleted untried: each event only names the object, and the
 * pending one reconciles its current state.
 * Messages without a group (not FIFO) are each their own.
 */
export async function settleBatch<M>(items: readonly M[], batch: BatchOptions<M>): Promise<Map<M, { outcome: Outcome; settlement: Settlement }>> {
  const groups = new Map<string, M[]>();
  items.forEach((item, i) => {
    const key = batch.groupOf(item) ?? `#${i}`;
    groups.set(key, [...(groups.get(key) ?? []), item]);
  });
  const settled = new Map<M, { outcome: Outcome; settlement: Settlement }>();
  await Promise.all(
    [...groups.values()].map(async (group) => {
      let pending = false;
      for (const item of group) {
        if (pending) {
          settled.set(item, {
            outcome: { result: "success", detail: "superseded: an earlier message of this object is pending, and it reconciles the current state" },
            settlement: { action: "delete" },
          });
          continue;
        }
        const delivery = batch.deliveryOf(item);
        const outcome = await attempt(delivery, batch);
        const decided = batch.policy(outcome, delivery);
        // The copy's deferral attributes steer its next delivery: under a MAC only the function can make.
        const settlement =
          decided.action === "resend" && delivery.ok ? { ...decided, attributes: delivery.deferralAttributes(decided.since, decided.deferrals) } : decided;
        settled.set(item, { outcome, settlement });
        pending = holdsTheGroup(settlement);
      }
    }),
  );
  return settled;
}

/**
 * One received event through its cluster's circuit: deferred untried while it is open (but for
 * the probe). A refused message never reaches an API server: its outcome is already decided.
 */
async function attempt(delivery: Delivery, batch: Pick<BatchOptions<unknown>, "runtime" | "circuits" | "log" | "pause" | "startable">): Promise<Outcome> {
  if (!delivery.ok) return delivery.outcome;
  // Deferred as an outage is (a fresh copy near the receive limit), but the circuit is not told: the API server did nothing wrong.
  if (batch.startable?.() === false) return { result: "unavailable", detail: "deferred untried: too little of the invocation's time is left to finish it" };
  const circuit = batch.circuits?.of(delivery.event.cluster);
  if (circuit && !(await admitted(circuit, batch.pause ?? sleep))) return { result: "unavailable", detail: "deferred while the API server is unavailable" };
  let outcome: Outcome & { apiCalls?: number };
  try {
    outcome = await batch.runtime.handle(delivery);
  } catch (error) {
    batch.log.error({ messageId: delivery.message.id, error: (error as Error).message }, "handler threw");
    outcome = { result: "retry", detail: (error as Error).message };
  }
  if (circuit) report(circuit, outcome);
  return outcome;
}

/** Whether the circuit admits the message (closed, or as its probe); it waits only on a probe under way, up to ADMISSION_WAIT_MS. */
async function admitted(circuit: Circuit, pause: (ms: number) => Promise<unknown>): Promise<boolean> {
  let waited = 0;
  for (;;) {
    const admission = circuit.admit();
    if (typeof admission !== "number") return true;
    if (!circuit.isProbing() || waited + admission > ADMISSION_WAIT_MS) return false;
    await pause(admission);
    waited += admission;
  }
}

/** The deferral attributes of a deferred message's copy: with their MAC (settleBatch), or bare where no received event gave one. */
export function deferralAttributesOf(s: Extract<Settlement, { action: "resend" }>): Record<string, string> {
  return s.attributes ?? { [DEFERRED_SINCE_ATTRIBUTE]: String(s.since), [DEFERRALS_ATTRIBUTE]: String(s.deferrals) };
}

/**
 * A deferred message's copy, into its own FIFO group (behind whatever waits there), with a fresh
 * receive count. Its deduplication id is new (the original's and the deferral count), its
 * attributes count the deferrals and keep when they began, under a MAC (delivery.ts).
 */
export function resendRequest(
  queueUrl: string,
  m: { Body?: string; MessageId?: string; Attributes?: Partial<Record<string, string>> },
  s: Extract<Settlement, { action: "resend" }>,
) {
  const group = m.Attributes?.MessageGroupId;
  return {
    QueueUrl: queueUrl,
    MessageBody: m.Body ?? "",
    ...(group
      ? {
          MessageGroupId: group,
          MessageDeduplicationId: createHash("sha256")
            .update(`${m.MessageId ?? ""}:deferred:${s.deferrals}`)
            .digest("hex"),
        }
      : { DelaySeconds: s.seconds }),
    MessageAttributes: Object.fromEntries(
      Object.entries(deferralAttributesOf(s)).map(([name, value]) => [
        name,
        { DataType: name === DEFERRAL_MAC_ATTRIBUTE ? "String" : "Number", StringValue: value },
      ]),
    ),
  };
}
