// Publishes key events to SQS without ever dropping the latest state of an object.
//
// Pending events are coalesced by object key: only the newest announcement of an object waits,
// so the buffer holds at most one entry per object and at most `maxPending` entries in all,
// counting those in flight (a failed batch goes back into the buffer, so it must fit there).
// When it is full, `offer` waits, which stops the watch reading (backpressure) until the queue
// accepts again. An object with a batch in flight is not sent again until that batch settles,
// so one object's events reach its FIFO group in order. Batches fill by themselves: see #pump.
import { SendMessageBatchCommand, type SendMessageBatchRequestEntry, type SQSClient } from "@aws-sdk/client-sqs";
import type { Logger } from "pino";
import { backoffMs, type BackoffPolicy } from "../core/backoff.ts";
import { deduplicationId, encodeKeyEvent, messageGroupId, supersede, type KeyEvent } from "../core/event.ts";
import type { BridgeMetrics } from "./metrics.ts";
import type { AnnounceOptions } from "./tracker.ts";

export interface PublisherOptions {
  sqs: SQSClient;
  /** The queue an event goes to: one for all, or one per resource (a queue per operator). */
  queueUrlOf: (event: KeyEvent) => string;
  maxPending: number;
  /** Bytes of object bodies waiting at most; above it new events go without their body (the function reads it). */
  maxPendingBodyBytes?: number;
  concurrency: number;
  logger: Logger;
  metrics: BridgeMetrics;
  now: () => number;
}

interface Pending {
  key: string;
  event: KeyEvent;
  cause: string;
  queueUrl: string;
  entry: Omit<SendMessageBatchRequestEntry, "Id">;
  /** When the oldest change this entry stands for was first queued (for the lag metric). */
  since: number;
  /** Not sent before this time (ms): it waits for what usually follows. */
  notBefore: number;
  /** The size of the body it carries. */
  bodyBytes: number;
}

const MAX_BATCH = 10;
/** 32 MiB: 500 waiting objects of 64 KiB, or every one of 1000 at a typical few KiB. */
export const DEFAULT_MAX_PENDING_BODY_BYTES = 32 * 1024 * 1024;
const BACKOFF: BackoffPolicy = { initialMs: 200, maxMs: 10_000, jitter: 0.5 };

export class Publisher {
  readonly #o: PublisherOptions;
  readonly #pending = new Map<string, Pending>();
  readonly #inflight = new Map<string, Pending>();
  #roomWaiters: Array<() => void> = [];
  #idleWaiters: Array<() => void> = [];
  #batches = 0;
  #bodyBytes = 0;
  #failureStreak = 0;
  #backoffUntil = 0;
  #timer: NodeJS.Timeout | undefined;
  #holdTimer: NodeJS.Timeout | undefined;
  #holdAt = Infinity;
  #closed = false;

  constructor(options: PublisherOptions) {
    this.#o = options;
  }

  /** Objects not yet accepted by the queue: waiting or in flight. Never above maxPending. */
  get pendingCount(): number {
    return this.#pending.size + this.#inflight.size;
  }

  /**
   * Queues the newest announcement of an object, replacing any older one still waiting
   * (`keepExisting`, used by resync: a waiting change says at least as much, keep it;
   * `onlyIfPending`: only bring a waiting one up to date). Resolves once the event is buffered;
   * waits while the buffer is full.
   */
  async offer(key: string, event: KeyEvent, cause: string, options: AnnounceOptions = {}): Promise<void> {
    if (options.onlyIfPending && !this.#pending.has(key)) return;
    while (!this.#closed && !this.#pending.has(key) && this.pendingCount >= this.#o.maxPending) {
      await new Promise<void>((resolve) => this.#roomWaiters.push(resolve));
    }
    if (this.#closed) return;
    const existing = this.#pending.get(key);
    if (existing !== undefined && options.keepExisting) return;
    if (options.onlyIfPending && existing === undefined) return;
    if (existing !== undefined) {
      event = supersede(existing.event, event);
      this.#bodyBytes -= existing.bodyBytes;
    }
    let body = encodeKeyEvent(event);
    let bodyBytes = event.object === undefined ? 0 : Buffer.byteLength(body, "utf8");
    if (bodyBytes > 0 && this.#bodyBytes + bodyBytes > (this.#o.maxPendingBodyBytes ?? DEFAULT_MAX_PENDING_BODY_BYTES)) {
      // Memory is bounded: past the budget the event names the object, and its function reads it.
      const { object: _dropped, ...keys } = event;
      event = keys;
      body = encodeKeyEvent(event);
      bodyBytes = 0;
    }
    this.#bodyBytes += bodyBytes;
    const entry: Pending["entry"] = { MessageBody: body, MessageGroupId: messageGroupId(event), MessageDeduplicationId: deduplicationId(event, existing && options.onlyIfPending ? existing.cause : cause) };
    // What a hold waits for (the function's status write) arrives as a body update: the wait is over.
    const notBefore = options.onlyIfPending ? 0 : options.holdMs ? this.#o.now() + options.holdMs : 0;
    this.#pending.set(key, { key, event, cause: existing && options.onlyIfPending ? existing.cause : cause, queueUrl: this.#o.queueUrlOf(event), entry, since: existing?.since ?? this.#o.now(), notBefore: existing && !options.onlyIfPending ? Math.min(existing.notBefore, notBefore) : notBefore, bodyBytes });
    this.#pump();
  }

  /** Waits until everything buffered has been accepted by the queue, or the deadline passes. */
  async flush(timeoutMs: number): Promise<boolean> {
    if (this.#isIdle()) return true;
    // Nothing waits any longer for what might follow: the bridge is stopping.
    for (const p of this.#pending.values()) p.notBefore = 0;
    this.#pump();
    let timer: NodeJS.Timeout | undefined;
    const idle = new Promise<boolean>((resolve) => this.#idleWaiters.push(() => resolve(true)));
    const late = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), timeoutMs)));
    try {
      return await Promise.race([idle, late]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Stops sending; buffered events are abandoned (whoever publishes next relists). */
  close(): void {
    this.#closed = true;
    clearTimeout(this.#timer);
    clearTimeout(this.#holdTimer);
    this.#wake(this.#roomWaiters);
  }

  /** Pumps again when a held entry comes due. */
  #wakeAt(at: number): void {
    if (this.#holdTimer !== undefined && this.#holdAt <= at) return;
    clearTimeout(this.#holdTimer);
    this.#holdAt = at;
    this.#holdTimer = setTimeout(() => {
      this.#holdTimer = undefined;
      this.#holdAt = Infinity;
      this.#pump();
    }, Math.max(0, at - this.#o.now()));
  }

  #isIdle(): boolean {
    return this.#pending.size === 0 && this.#batches === 0;
  }

  #wake(waiters: Array<() => void>): void {
    const all = waiters.splice(0);
    for (const w of all) w();
  }

  #pump(): void {
    if (this.#closed) return;
    const wait = this.#backoffUntil - this.#o.now();
    if (wait > 0) {
      if (this.#timer === undefined && this.#pending.size > 0) {
        this.#timer = setTimeout(() => {
          this.#timer = undefined;
          this.#pump();
        }, wait);
      }
      return;
    }
    while (this.#batches < this.#o.concurrency) {
      // One SendMessageBatch goes to one queue: the first sendable entry picks it.
      const batch: Pending[] = [];
      const now = this.#o.now();
      for (const p of this.#pending.values()) {
        if (p.notBefore > now) {
          this.#wakeAt(p.notBefore);
          continue;
        }
        if (this.#inflight.has(p.key) || (batch.length > 0 && p.queueUrl !== batch[0]!.queueUrl)) continue;
        batch.push(p);
        if (batch.length === MAX_BATCH) break;
      }
      if (batch.length === 0) break;
      // A part-filled batch goes only while nothing is in flight; otherwise its events wait for
      // the batch in flight to settle and go out together. Nothing waits when the queue is idle,
      // and a busy one gets fewer, fuller requests (each costs a billed SQS request, or ~2.7 ms
      // of ElasticMQ's CPU: `npm run bench`). Full batches (initial sync) still use every slot.
      if (batch.length < MAX_BATCH && this.#batches > 0) break;
      for (const p of batch) {
        this.#pending.delete(p.key);
        this.#bodyBytes -= p.bodyBytes;
        this.#inflight.set(p.key, p);
      }
      this.#batches++;
      void this.#send(batch);
    }
    this.#updateGauges();
    if (this.pendingCount < this.#o.maxPending) this.#wake(this.#roomWaiters);
  }

  async #send(batch: Pending[]): Promise<void> {
    let failed: Pending[] = [];
    this.#o.metrics.sendRequests.inc();
    try {
      const out = await this.#o.sqs.send(
        new SendMessageBatchCommand({ QueueUrl: batch[0]!.queueUrl, Entries: batch.map((p, i) => ({ Id: `e${i}`, ...p.entry })) }),
      );
      const now = this.#o.now();
      for (const ok of out.Successful ?? []) {
        const p = batch[Number(ok.Id?.slice(1))];
        if (p === undefined) continue;
        this.#o.metrics.published.inc({ type: p.event.type });
        this.#o.metrics.publishDelay.observe(Math.max(0, now - Date.parse(p.event.observedAt)) / 1000);
      }
      for (const bad of out.Failed ?? []) {
        const p = batch[Number(bad.Id?.slice(1))];
        if (p === undefined) continue;
        failed.push(p);
        this.#o.metrics.publishFailures.inc({ reason: bad.Code ?? "unknown" });
        this.#o.logger.warn({ code: bad.Code, senderFault: bad.SenderFault, object: p.key }, "queue rejected an event; retrying");
      }
      if (failed.length === 0) this.#failureStreak = 0;
    } catch (e) {
      failed = batch;
      const err = e as Error & { $metadata?: { httpStatusCode?: number } };
      this.#o.metrics.publishFailures.inc({ reason: err.name }, batch.length);
      if (this.#failureStreak === 0) this.#o.logger.warn({ err: err.message, status: err.$metadata?.httpStatusCode }, "queue unavailable; holding events and retrying");
    } finally {
      this.#batches--;
      for (const p of batch) this.#inflight.delete(p.key);
    }
    if (failed.length > 0) {
      this.#failureStreak++;
      this.#backoffUntil = this.#o.now() + backoffMs(this.#failureStreak, BACKOFF);
      // A newer announcement of the same object supersedes the failed one.
      for (const p of failed) {
        if (this.#pending.has(p.key)) continue;
        this.#pending.set(p.key, p);
        this.#bodyBytes += p.bodyBytes;
      }
    }
    this.#pump();
    if (this.#isIdle()) this.#wake(this.#idleWaiters);
  }

  #updateGauges(): void {
    let oldest = Infinity;
    for (const p of this.#inflight.values()) oldest = Math.min(oldest, p.since);
    for (const p of this.#pending.values()) {
      oldest = Math.min(oldest, p.since);
      break; // insertion order: the first waiting entry is (nearly) the oldest
    }
    this.#o.metrics.pending.set(this.pendingCount);
    this.#o.metrics.queueLag.set(oldest === Infinity ? 0 : (this.#o.now() - oldest) / 1000);
  }
}
