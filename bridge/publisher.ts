// Publishes key events to the queue service (SQS or Pub/Sub: a QueueTransport, transport.ts)
// without ever dropping the latest state of an object.
//
// Pending events are coalesced by object key: only the newest announcement of an object waits,
// so the buffer holds at most one entry per object and at most `maxPending` entries in all,
// counting those in flight (a failed batch goes back into the buffer, so it must fit there).
// When it is full, `offer` waits, which stops the watch reading (backpressure) until the queue
// accepts again. An object with a batch in flight is not sent again until that batch settles,
// so one object's events reach its stream (FIFO group, ordering key) in order. Batches fill by
// themselves: see #pump.
import type { Logger } from "pino";
import { backoffMs, type BackoffPolicy } from "../core/backoff.ts";
import { deduplicationId, encodeKeyEvent, messageGroupId, supersede, withinCap, type KeyEvent } from "../core/event.ts";
import { signKeyEvent, type EventKey } from "../core/event-auth.ts";
import type { BridgeMetrics } from "./metrics.ts";
import type { AnnounceOptions } from "./tracker.ts";
import { TransportError, type OutgoingMessage, type QueueTransport } from "./transport.ts";

export interface PublisherOptions {
  transport: QueueTransport;
  /** Where an event goes (a queue URL, a topic): one for all, or one per resource (a queue per operator). */
  destinationOf: (event: KeyEvent) => string;
  /** A destination found missing (true) or there again (false): a setting a person must fix. */
  onMissing?: (destination: string, missing: boolean) => void;
  maxPending: number;
  /** Bytes of object bodies waiting at most; above it new events go without their body (the function reads it). */
  maxPendingBodyBytes?: number;
  concurrency: number;
  logger: Logger;
  metrics: BridgeMetrics;
  now: () => number;
  /** The cluster's event key: every event is sent signed with it (core/event-auth.ts), so a function trusts its body. */
  eventKey: EventKey;
}

interface Pending {
  key: string;
  event: KeyEvent;
  cause: string;
  destination: string;
  message: OutgoingMessage;
  /** When the oldest change this entry stands for was first queued (for the lag metric). */
  since: number;
  /** Not sent before this time (ms): it waits for what usually follows. */
  notBefore: number;
  /** The size of the body it carries. */
  bodyBytes: number;
}

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
    // A parent too large for one message goes without its body, then without its children's keys.
    event = withinCap(event);
    // Signed as sent: what waits stays unsigned, since a newer announcement may still supersede it.
    let body = encodeKeyEvent(signKeyEvent(event, this.#o.eventKey));
    let bodyBytes = event.object === undefined ? 0 : Buffer.byteLength(body, "utf8");
    if (bodyBytes > 0 && this.#bodyBytes + bodyBytes > (this.#o.maxPendingBodyBytes ?? DEFAULT_MAX_PENDING_BODY_BYTES)) {
      // Memory is bounded: past the budget the event names the object, and its function reads it.
      const { object: _dropped, ...keys } = event;
      event = keys;
      body = encodeKeyEvent(signKeyEvent(event, this.#o.eventKey));
      bodyBytes = 0;
    }
    this.#bodyBytes += bodyBytes;
    const message: OutgoingMessage = { body, stream: messageGroupId(event), deduplicationId: deduplicationId(event, existing && options.onlyIfPending ? existing.cause : cause), cluster: event.cluster };
    // What a hold waits for (the function's status write) arrives as a body update: the wait is over.
    const notBefore = options.onlyIfPending ? 0 : options.holdMs ? this.#o.now() + options.holdMs : 0;
    this.#pending.set(key, { key, event, cause: existing && options.onlyIfPending ? existing.cause : cause, destination: this.#o.destinationOf(event), message, since: existing?.since ?? this.#o.now(), notBefore: existing && !options.onlyIfPending ? Math.min(existing.notBefore, notBefore) : notBefore, bodyBytes });
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
      // One request goes to one destination: the first sendable entry picks it.
      const batch: Pending[] = [];
      const now = this.#o.now();
      for (const p of this.#pending.values()) {
        if (p.notBefore > now) {
          this.#wakeAt(p.notBefore);
          continue;
        }
        if (this.#inflight.has(p.key) || (batch.length > 0 && p.destination !== batch[0]!.destination)) continue;
        batch.push(p);
        if (batch.length === this.#o.transport.maxBatch) break;
      }
      if (batch.length === 0) break;
      // A part-filled batch goes only while nothing is in flight; otherwise its events wait for
      // the batch in flight to settle and go out together. Nothing waits when the queue is idle,
      // and a busy one gets fewer, fuller requests (each costs a billed SQS request, or ~2.7 ms
      // of ElasticMQ's CPU: `npm run bench`). Full batches (initial sync) still use every slot.
      if (batch.length < this.#o.transport.maxBatch && this.#batches > 0) break;
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
    const destination = batch[0]!.destination;
    this.#o.metrics.sendRequests.inc();
    try {
      const results = await this.#o.transport.send(destination, batch.map((p) => p.message));
      const now = this.#o.now();
      let missing = false;
      results.forEach((r, i) => {
        const p = batch[i];
        if (p === undefined) return;
        if (r.ok) {
          this.#o.metrics.published.inc({ type: p.event.type });
          this.#o.metrics.publishDelay.observe(Math.max(0, now - Date.parse(p.event.observedAt)) / 1000);
          return;
        }
        missing ||= r.missing === true;
        failed.push(p);
        this.#o.metrics.publishFailures.inc({ reason: r.reason });
        this.#o.logger.warn({ reason: r.reason, object: p.key }, `${this.#o.transport.noun} rejected an event; retrying`);
      });
      this.#o.onMissing?.(destination, missing);
      if (failed.length === 0) this.#failureStreak = 0;
    } catch (e) {
      failed = batch;
      const err = e instanceof TransportError ? e : new TransportError((e as Error).message, { reason: (e as Error).name });
      this.#o.metrics.publishFailures.inc({ reason: err.reason }, batch.length);
      if (err.missing) this.#o.onMissing?.(destination, true);
      else if (this.#failureStreak === 0) this.#o.logger.warn({ err: err.message, status: err.status, [this.#o.transport.noun]: destination }, `${this.#o.transport.noun} unavailable; holding events and retrying`);
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
