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
import { SpanStatusCode, trace, type Link, type Span, type Tracer } from "@opentelemetry/api";
import type { Logger } from "pino";
import { backoffMs, type BackoffPolicy } from "../core/backoff.ts";
import {
  deduplicationId,
  encodeKeyEvent,
  messageGroupId,
  supersede,
  TRACE_CONTEXT_BYTES,
  TRACEPARENT_ANNOTATION,
  withinCap,
  type KeyEvent,
} from "../core/event.ts";
import { operatorKey, operatorResource, signatureBytes, signKeyEvent, signingKey, type EventKey, type SigningKey } from "../core/event-auth.ts";
import { contextFrom, fieldsOf, within } from "../clients/tracing.ts";
import type { BridgeMetrics } from "./metrics.ts";
import type { Timers } from "./due-schedule.ts";
import type { AnnounceOptions, ScheduledBy } from "./sink.ts";
import { SendCredit } from "./send-credit.ts";
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
  /** Overrides the transport's linger (transport.lingerMs). */
  lingerMs?: number;
  logger: Logger;
  metrics: BridgeMetrics;
  now: () => number;
  /** Sets the timers of backoff, holds and flush's deadline (due-schedule.ts). */
  timers: Timers;
  /**
   * The cluster's event key: every event is sent signed with its operator's key, derived from it
   * (core/event-auth.ts operatorKey), so that operator's function, and only it, trusts its body.
   */
  eventKey: EventKey;
  /** Traces each change from its announcement to the queue's answer (clients/tracing.ts); untraced without. */
  tracer?: Tracer;
}

/** A change's trace in the bridge: its root, which the event carries onwards, and the hold within it. */
interface ChangeSpans {
  change: Span;
  /** Until the event goes into a batch: the hold and the linger. */
  hold: Span | undefined;
}

interface Pending {
  key: string;
  event: KeyEvent;
  cause: string;
  destination: string;
  /**
   * The event signed and serialized, made when it first goes into a batch (#ready): most
   * announcements in a cold start are superseded or withdrawn while they wait, and signing and
   * serializing each at once was a large share of the bridge's CPU (`bench:coldscale --cpu-prof`).
   */
  message?: OutgoingMessage;
  /** When the oldest change this entry stands for was first queued (for the lag metric). */
  since: number;
  /** Not sent before this time (ms): it waits for what usually follows. */
  notBefore: number;
  /** The size of the event with its body, as it will be sent; 0 without a body. */
  bodyBytes: number;
  /**
   * Every announcement it stands for was held (the function's own child writes, a child gone):
   * nothing in it is news once the function's status records the children as they are.
   */
  held: boolean;
  /** With a tracer: the trace this announcement continues into the event. */
  spans?: ChangeSpans;
}

/**
 * The linger while a starting bridge announces its first lists' work (start-window.ts): at the
 * rate the window releases objects (about 90/s in a 10k cold start on 2 cores) the 40 ms linger
 * sent 4.3 events a request, and the SQS client's work per request (signing, middleware, HTTP)
 * was about a sixth of the bridge's CPU profile, on the cluster's core. Held to one part-filled
 * request per 250 ms, batches fill to 10 at 40 objects/s or more (2,323 → 1,036–1,072 requests for
 * 10,000 events); the wait, at most 250 ms, is small beside a cold start's queue. Changes that
 * arrive meanwhile wait as long.
 */
export const START_LINGER_MS = 250;

/**
 * How many objects' last sent change the publisher remembers (tracing only), for the schedule the
 * reconcile of that change records to link to (ParentTracker takes it when the status write
 * arrives, seconds later at most). Bounded so a traced bridge of 100k objects does not keep a
 * context for each: about 2 MiB at most, the oldest forgotten first.
 */
export const REMEMBERED_TRACES = 10_000;

/** 32 MiB: 500 waiting objects of 64 KiB, or every one of 1000 at a typical few KiB. */
export const DEFAULT_MAX_PENDING_BODY_BYTES = 32 * 1024 * 1024;
const BACKOFF: BackoffPolicy = { initialMs: 200, maxMs: 10_000, jitter: 0.5 };

export class Publisher {
  readonly #options: PublisherOptions;
  /** Each operator's key (by its resource) with its secret imported once, derived on the first of its events: signing is hot. */
  readonly #signing = new Map<string, SigningKey>();
  /** What signing adds to an event: kept free under the size cap. */
  readonly #signatureBytes: number;
  /** The linger as set (options.lingerMs, else the transport's). */
  readonly #lingerMs: number;
  readonly #pending = new Map<string, Pending>();
  readonly #inflight = new Map<string, Pending>();
  #roomWaiters: Array<() => void> = [];
  #idleWaiters: Array<() => void> = [];
  #batches = 0;
  #bodyBytes = 0;
  #failureStreak = 0;
  #backoffUntil = 0;
  /** Cancels the timer that ends a backoff, if one is set. */
  #cancelBackoff: (() => void) | undefined;
  /** Cancels the timer that ends the earliest hold, if one is set. */
  #cancelHold: (() => void) | undefined;
  #holdAt = Infinity;
  /** When a part-filled batch may go (transport.lingerMs). */
  readonly #credit: SendCredit;
  /** Stopping: nothing lingers. */
  #flushing = false;
  #closed = false;
  /** Tracing only: each recently sent object's change (its traceparent), oldest first. */
  readonly #lastSent = new Map<string, string>();

  constructor(options: PublisherOptions) {
    this.#options = options;
    // A traced event gains its context after the cap is applied: room is kept for it.
    this.#signatureBytes = signatureBytes(options.eventKey.kid) + (options.tracer ? TRACE_CONTEXT_BYTES : 0);
    this.#lingerMs = options.lingerMs ?? options.transport.lingerMs;
    this.#credit = new SendCredit(this.#lingerMs);
  }

  /**
   * Whether a starting bridge's first-list work is being announced (start-window.ts): part-filled
   * batches then go at most one per START_LINGER_MS, where the transport lingers at all.
   */
  startWork(active: boolean): void {
    const linger = this.#lingerMs;
    if (this.#credit.pace(this.#options.now(), active && linger > 0 ? Math.max(linger, START_LINGER_MS) : linger)) this.#pump();
  }

  /** The traceparent of the change last sent for `key`, if traced and still remembered (REMEMBERED_TRACES). */
  lastTrace(key: string): string | undefined {
    return this.#lastSent.get(key);
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
    // A withdrawal ends here, unless it also brings a waiting (not withdrawn) event up to date.
    if (options.withdrawHeld && (this.#withdrawHeld(key) || !options.onlyIfPending)) return;
    if (options.onlyIfPending && !this.#pending.has(key)) return;
    while (!this.#closed && !this.#pending.has(key) && this.pendingCount >= this.#options.maxPending) {
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
    const sized = withinCap(event, this.#signatureBytes);
    event = sized.event;
    let bodyBytes = event.object === undefined ? 0 : sized.bytes;
    if (bodyBytes > 0 && this.#bodyBytes + bodyBytes > (this.#options.maxPendingBodyBytes ?? DEFAULT_MAX_PENDING_BODY_BYTES)) {
      // Memory is bounded: past the budget the event names the object, and its function reads it.
      const { object: _dropped, ...keys } = event;
      event = keys;
      bodyBytes = 0;
    }
    this.#bodyBytes += bodyBytes;
    // What a hold waits for (the function's status write) arrives as a body update: the wait is over.
    const notBefore = options.onlyIfPending ? 0 : options.holdMs ? this.#options.now() + options.holdMs : 0;
    // A body update adds no news; anything announced without a hold does.
    const held = options.onlyIfPending ? existing?.held === true : (existing?.held ?? true) && options.holdMs !== undefined && options.holdMs > 0;
    if (existing?.spans && options.scheduled) this.#scheduledInto(existing.spans.change, options.scheduled);
    const spans = this.#options.tracer && (existing?.spans ?? this.#startChange(this.#options.tracer, key, event, cause, options));
    this.#pending.set(key, {
      key,
      event,
      ...(spans ? { spans } : {}),
      cause: existing && options.onlyIfPending ? existing.cause : cause,
      destination: this.#options.destinationOf(event),
      since: existing?.since ?? this.#options.now(),
      notBefore: existing && !options.onlyIfPending ? Math.min(existing.notBefore, notBefore) : notBefore,
      bodyBytes,
      held,
    });
    this.#pump();
  }

  /**
   * A change's trace starts when the bridge saw it (observedAt), or continues the context a writer
   * put on the object (TRACEPARENT_ANNOTATION). A newer announcement superseding a waiting one
   * joins its trace: one message stands for both. What fell due on the object's schedule starts a
   * trace of its own, linked to the one that scheduled it: a requeue every 5 minutes continuing
   * one trace would make a trace of the object's whole life, and a writer's annotation stays on
   * the object long after the change it traced.
   */
  #startChange(tracer: Tracer, key: string, event: KeyEvent, cause: string, options: AnnounceOptions): ChangeSpans {
    const { scheduled, holdMs } = options;
    const annotations = (event.object?.metadata as { annotations?: Record<string, unknown> } | undefined)?.annotations;
    const given = scheduled ? undefined : annotations?.[TRACEPARENT_ANNOTATION];
    const parent = contextFrom(typeof given === "string" ? { traceparent: given } : {});
    const link = scheduled && linkOf(scheduled);
    const attributes = {
      "crdfn.object": key,
      // As the function's span names it (the event's reason), or what fell due.
      "crdfn.cause": scheduled?.kind ?? event.reason ?? event.type,
      "crdfn.dedup_cause": cause,
      "crdfn.reason": event.reason ?? "",
      "crdfn.event_type": event.type,
      "k8s.object.uid": event.uid,
      "k8s.object.resource_version": event.resourceVersion,
    };
    const observed = Date.parse(event.observedAt);
    const change = tracer.startSpan(
      "bridge change",
      { attributes, startTime: Math.min(observed, this.#options.now()), ...(link ? { links: [link] } : {}) },
      parent,
    );
    const hold = tracer.startSpan("bridge hold", { attributes: { "crdfn.hold_ms": holdMs ?? 0 } }, within(parent, change));
    return { change, hold };
  }

  /** A schedule fell due while a change of the object waited: the one message answers both, so its trace links to the scheduler's too. */
  #scheduledInto(change: Span, scheduled: ScheduledBy): void {
    const link = linkOf(scheduled);
    if (link) change.addLink(link);
    change.setAttribute("crdfn.cause", scheduled.kind);
  }

  /** Ends an announcement's trace that will not be sent (withdrawn, superseded by nothing, refused). */
  #endUnsent(p: Pending, outcome: string): void {
    p.spans?.hold?.end();
    p.spans?.change.setAttribute("crdfn.outcome", outcome);
    p.spans?.change.end();
  }

  /** The key of the event's operator, derived and imported once per resource: signing is hot. */
  #signingKeyOf(event: KeyEvent): SigningKey {
    const resource = operatorResource(event);
    let key = this.#signing.get(resource);
    if (!key) this.#signing.set(resource, (key = signingKey(operatorKey(this.#options.eventKey, resource))));
    return key;
  }

  /**
   * Signs and serializes an entry as it first goes into a batch (signed as sent: a newer
   * announcement may still supersede what waits). False for an event the contract cannot carry
   * (only a name it cannot hold gets here): logged and dropped, since no retry would fix it.
   */
  #ready(p: Pending): boolean {
    if (p.message !== undefined) return true;
    try {
      p.message = {
        body: encodeKeyEvent(signKeyEvent(p.spans ? { ...p.event, ...fieldsOf(p.spans.change) } : p.event, this.#signingKeyOf(p.event))),
        stream: messageGroupId(p.event),
        deduplicationId: deduplicationId(p.event, p.cause),
        cluster: p.event.cluster,
      };
      return true;
    } catch (e) {
      this.#pending.delete(p.key);
      this.#bodyBytes -= p.bodyBytes;
      this.#endUnsent(p, "refused");
      this.#options.logger.error({ object: p.key, err: (e as Error).message.slice(0, 300) }, "object cannot be announced under the event contract");
      // It may have been all that waited: a flush waiting for idle is done.
      if (this.#isIdle()) this.#wake(this.#idleWaiters);
      return false;
    }
  }

  /** Drops the object's waiting announcement if it stands only for held child changes; whether it did. */
  #withdrawHeld(key: string): boolean {
    const existing = this.#pending.get(key);
    if (existing === undefined || !existing.held) return false;
    this.#pending.delete(key);
    this.#bodyBytes -= existing.bodyBytes;
    this.#endUnsent(existing, "withdrawn");
    this.#options.metrics.withdrawn.inc();
    this.#pump();
    if (this.#isIdle()) this.#wake(this.#idleWaiters);
    return true;
  }

  /** Waits until everything buffered has been accepted by the queue, or the deadline passes. */
  async flush(timeoutMs: number): Promise<boolean> {
    if (this.#isIdle()) return true;
    // Nothing waits any longer for what might follow: the bridge is stopping.
    for (const p of this.#pending.values()) p.notBefore = 0;
    this.#flushing = true;
    this.#pump();
    // The pump may have dropped all that waited (#ready).
    if (this.#isIdle()) return true;
    let cancel: () => void = () => undefined;
    const idle = new Promise<boolean>((resolve) => this.#idleWaiters.push(() => resolve(true)));
    const late = new Promise<boolean>((resolve) => (cancel = this.#options.timers.after(timeoutMs, () => resolve(false))));
    try {
      return await Promise.race([idle, late]);
    } finally {
      cancel();
    }
  }

  /** Stops sending; buffered events are abandoned (whoever publishes next relists). */
  close(): void {
    this.#closed = true;
    this.#cancelBackoff?.();
    this.#cancelHold?.();
    this.#wake(this.#roomWaiters);
  }

  /** Pumps again when a held entry comes due. */
  #wakeAt(at: number): void {
    if (this.#cancelHold !== undefined && this.#holdAt <= at) return;
    this.#cancelHold?.();
    this.#holdAt = at;
    this.#cancelHold = this.#options.timers.after(Math.max(0, at - this.#options.now()), () => {
      this.#cancelHold = undefined;
      this.#holdAt = Infinity;
      this.#pump();
    });
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
    const wait = this.#backoffUntil - this.#options.now();
    if (wait > 0) {
      if (this.#cancelBackoff === undefined && this.#pending.size > 0) {
        this.#cancelBackoff = this.#options.timers.after(wait, () => {
          this.#cancelBackoff = undefined;
          this.#pump();
        });
      }
      return;
    }
    while (this.#batches < this.#options.concurrency) {
      // One request goes to one destination: the first sendable entry picks it.
      const batch: Pending[] = [];
      const now = this.#options.now();
      for (const p of this.#pending.values()) {
        if (p.notBefore > now) {
          this.#wakeAt(p.notBefore);
          continue;
        }
        if (this.#inflight.has(p.key) || (batch.length > 0 && p.destination !== batch[0]!.destination)) continue;
        if (!this.#ready(p)) continue;
        batch.push(p);
        if (batch.length === this.#options.transport.maxBatch) break;
      }
      if (batch.length === 0) break;
      // A part-filled batch goes only while nothing is in flight; otherwise its events wait for
      // the batch in flight to settle and go out together. Nothing waits when the queue is idle,
      // and a busy one gets fewer, fuller requests (each costs a billed SQS request, or ~2.7 ms
      // of ElasticMQ's CPU: `npm run bench`). Full batches (initial sync) still use every slot.
      if (batch.length < this.#options.transport.maxBatch && this.#batches > 0) break;
      // And part-filled batches go at most one per linger on average (send-credit.ts): a change
      // after a quiet spell goes at once, while at 50 changes/s a request carries a few.
      const dueAt = this.#credit.dueAt(now);
      if (batch.length < this.#options.transport.maxBatch && dueAt > now && !this.#flushing) {
        this.#wakeAt(dueAt);
        break;
      }
      this.#credit.spend(now);
      for (const p of batch) {
        this.#pending.delete(p.key);
        this.#bodyBytes -= p.bodyBytes;
        this.#inflight.set(p.key, p);
        if (p.spans?.hold) {
          p.spans.hold.setAttribute("crdfn.linger_ms", now - p.since);
          p.spans.hold.end();
          p.spans.hold = undefined;
        }
        // Remembered as it goes, not once the queue answers: its function may write its status
        // (and a schedule) before this bridge reads the queue's answer.
        if (p.spans) this.#remember(p.key, p.spans.change);
      }
      this.#batches++;
      void this.#send(batch);
    }
    this.#updateGauges();
    if (this.pendingCount < this.#options.maxPending) this.#wake(this.#roomWaiters);
  }

  async #send(batch: Pending[]): Promise<void> {
    let failed: Pending[] = [];
    const destination = batch[0]!.destination;
    this.#options.metrics.sendRequests.inc();
    const sends = this.#options.tracer ? this.#startSends(this.#options.tracer, batch, destination) : undefined;
    try {
      const results = await this.#options.transport.send(
        destination,
        batch.map((p) => p.message!),
      );
      const now = this.#options.now();
      let missing = false;
      results.forEach((r, i) => {
        const p = batch[i];
        if (p === undefined) return;
        if (r.ok) {
          sends?.[i]?.end();
          p.spans?.change.setAttribute("crdfn.outcome", "sent");
          p.spans?.change.end();
          this.#options.metrics.published.inc({ type: p.event.type });
          this.#options.metrics.publishDelay.observe(Math.max(0, now - Date.parse(p.event.observedAt)) / 1000);
          return;
        }
        missing ||= r.missing === true;
        failed.push(p);
        sends?.[i]?.setStatus({ code: SpanStatusCode.ERROR, message: r.reason }).end();
        this.#options.metrics.publishFailures.inc({ reason: r.reason });
        this.#options.logger.warn({ reason: r.reason, object: p.key }, `${this.#options.transport.noun} rejected an event; retrying`);
      });
      this.#options.onMissing?.(destination, missing);
      if (failed.length === 0) this.#failureStreak = 0;
    } catch (e) {
      failed = batch;
      const err = e instanceof TransportError ? e : new TransportError((e as Error).message, { reason: (e as Error).name });
      for (const span of sends ?? []) span?.setStatus({ code: SpanStatusCode.ERROR, message: err.reason }).end();
      this.#options.metrics.publishFailures.inc({ reason: err.reason }, batch.length);
      if (err.missing) this.#options.onMissing?.(destination, true);
      else if (this.#failureStreak === 0)
        this.#options.logger.warn(
          { err: err.message, status: err.status, [this.#options.transport.noun]: destination },
          `${this.#options.transport.noun} unavailable; holding events and retrying`,
        );
    } finally {
      this.#batches--;
      for (const p of batch) this.#inflight.delete(p.key);
    }
    if (failed.length > 0) {
      this.#failureStreak++;
      this.#backoffUntil = this.#options.now() + backoffMs(this.#failureStreak, BACKOFF);
      // A newer announcement of the same object supersedes the failed one.
      for (const p of failed) {
        if (this.#pending.has(p.key)) {
          this.#endUnsent(p, "superseded");
          continue;
        }
        this.#pending.set(p.key, p);
        this.#bodyBytes += p.bodyBytes;
      }
    }
    this.#pump();
    if (this.#isIdle()) this.#wake(this.#idleWaiters);
  }

  /** One send span per event in the batch, under its change: a retried batch shows as a second one. */
  #startSends(tracer: Tracer, batch: Pending[], destination: string): Array<Span | undefined> {
    return batch.map((p) =>
      p.spans
        ? tracer.startSpan(
            "bridge send",
            {
              attributes: {
                "crdfn.batch_size": batch.length,
                "messaging.system": this.#options.transport.noun === "queue" ? "aws_sqs" : "gcp_pubsub",
                "messaging.destination.name": destination,
              },
            },
            within(contextFrom({}), p.spans.change),
          )
        : undefined,
    );
  }

  #remember(key: string, change: Span): void {
    const { traceparent } = fieldsOf(change);
    if (traceparent === undefined) return;
    this.#lastSent.delete(key);
    this.#lastSent.set(key, traceparent);
    if (this.#lastSent.size > REMEMBERED_TRACES) this.#lastSent.delete(this.#lastSent.keys().next().value!);
  }

  #updateGauges(): void {
    let oldest = Infinity;
    for (const p of this.#inflight.values()) oldest = Math.min(oldest, p.since);
    for (const p of this.#pending.values()) {
      oldest = Math.min(oldest, p.since);
      break; // insertion order: the first waiting entry is (nearly) the oldest
    }
    this.#options.metrics.pending.set(this.pendingCount);
    this.#options.metrics.queueLag.set(oldest === Infinity ? 0 : (this.#options.now() - oldest) / 1000);
  }
}

/** The link to the trace that scheduled what fell due; none when the bridge does not know it. */
function linkOf(scheduled: ScheduledBy): Link | undefined {
  if (scheduled.traceparent === undefined) return undefined;
  const context = trace.getSpanContext(contextFrom({ traceparent: scheduled.traceparent }));
  return context && trace.isSpanContextValid(context) ? { context, attributes: { "crdfn.link": scheduled.kind } } : undefined;
}
