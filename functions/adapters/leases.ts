// The messages the local poller has in hand, per queue, shared by that queue's receive loops.
// Lambda's event source keeps a batch hidden by the rule it is deployed with (visibility ≥ 6 ×
// the function timeout, deploy/serverless.ts); the poller has no function timeout, so it keeps
// each message hidden itself, for as long as it takes:
//  * until the message's settlement has landed (its delete answered, or its own visibility set),
//    not only while its batch runs: a delete waiting in the delete batcher's window is still in
//    hand. Extended every third of the visibility timeout, so an extension may come up to two
//    thirds of it late and still land in time.
//  * a message the queue hands out again while it is in hand (its visibility lapsed: the process's
//    thread was held by a long synchronous reconcile, or an extension came too late on a loaded
//    machine) is recognised by its id: its new receipt handle replaces the one in hand (the queue
//    honours only the latest one) and no second handling starts. A delete or a visibility the
//    queue refuses because such a receive took the message first is judged only once the receives
//    under way have been answered (renewal()): the queue answers the refusal as soon as it made
//    it, while the receive's answer, and its new receipt handle, may still be on its way.
//  * a message of an object (a FIFO group) that has an earlier message in hand is handled only
//    once that one's handling has ended: the queue holds a group's next message back only while
//    the earlier one is hidden, and this keeps it so when it was not.
// Together: one handling of an object at a time in this process, whatever the reconcile's length.
import type { Message } from "@aws-sdk/client-sqs";
import type { Logger } from "pino";
import type { SqsClientSource } from "../runtime/sqs-client.ts";

/** SQS's most entries per ChangeMessageVisibilityBatch. */
const MAX_ENTRIES = 10;

/** One message in hand. */
export class Lease {
  readonly id: string;
  readonly group: string | undefined;
  /** The latest receipt handle the queue gave for it: the only one it honours. */
  receipt: string;
  /** Set once its settlement is decided: "visibility" settlements set their own, so the heartbeat leaves them alone. */
  settling: "delete" | "visibility" | undefined;
  /** When its visibility runs out, as far as this process knows (performance.now() ms). */
  hiddenUntil: number;
  /** Its visibility lapsed at least once while in hand (said once). */
  lapsed = false;
  /** An extension the queue refused, judged at the next one: by then a new receipt handle may have come with a receive under way. */
  refused: { receipt: string; code: string | undefined; message: string | undefined } | undefined;
  readonly #handled = Promise.withResolvers<void>();
  readonly #released = Promise.withResolvers<void>();
  #renewed = Promise.withResolvers<void>();
  readonly #receivesLanded: () => Promise<void>;

  constructor(message: Message, hiddenUntil: number, receivesLanded: () => Promise<void> = () => Promise.resolve()) {
    this.id = message.MessageId ?? "";
    this.group = message.Attributes?.MessageGroupId;
    this.receipt = message.ReceiptHandle ?? "";
    this.hiddenUntil = hiddenUntil;
    this.#receivesLanded = receivesLanded;
  }

  /** Received again while in hand: the new receipt handle is the only one the queue honours now. */
  renew(receipt: string, hiddenUntil: number): void {
    this.receipt = receipt;
    this.hiddenUntil = hiddenUntil;
    this.#renewed.resolve();
    this.#renewed = Promise.withResolvers<void>();
  }

  /**
   * Resolves once it has a new receipt handle, or once every receive under way has been answered
   * and none brought one: what a refusal of its receipt handle is judged after.
   */
  renewal(): Promise<void> {
    return Promise.race([this.#renewed.promise, this.#receivesLanded()]);
  }

  /** Resolves when its handling has ended, or it was settled without one. */
  get handled(): Promise<void> {
    return this.#handled.promise;
  }

  /** Resolves when its settlement has landed and it is out of hand. */
  get released(): Promise<void> {
    return this.#released.promise;
  }

  endHandling(): void {
    this.#handled.resolve();
  }

  endRelease(): void {
    this.#handled.resolve();
    this.#released.resolve();
  }
}

export interface LeasesOptions {
  sqs: SqsClientSource;
  queueUrl: string;
  logger: Logger;
  /** Tests pass a clock; default performance.now(). */
  now?: () => number;
}

export class Leases {
  readonly #o: LeasesOptions;
  readonly #now: () => number;
  readonly #byId = new Map<string, Lease>();
  #visibilitySeconds = 30;
  #timer: NodeJS.Timeout | undefined;
  #extending: Promise<unknown> = Promise.resolve();
  /** The receives of this queue under way, each until its messages have been taken. */
  readonly #receives = new Set<Promise<void>>();

  constructor(options: LeasesOptions) {
    this.#o = options;
    this.#now = options.now ?? (() => performance.now());
  }

  /** Messages in hand now. */
  get size(): number {
    return this.#byId.size;
  }

  /**
   * A receive is under way: its answer may bring a message in hand a new receipt handle. Call the
   * returned function once its messages have been taken, or it failed (more than once is harmless).
   */
  receiving(): () => void {
    const { promise, resolve } = Promise.withResolvers<void>();
    this.#receives.add(promise);
    return () => {
      this.#receives.delete(promise);
      resolve();
    };
  }

  /** Resolves once every receive under way now has been answered and its messages taken. */
  receivesLanded(): Promise<void> {
    return Promise.all([...this.#receives]).then(() => undefined);
  }

  /**
   * Leases the received messages that are not in hand yet, and returns them with their leases. One
   * already in hand is not returned: its handling is under way, and takes its new receipt handle.
   */
  take(messages: readonly Message[], visibilitySeconds: number): Array<{ message: Message; lease: Lease }> {
    this.#visibilitySeconds = visibilitySeconds;
    const fresh: Array<{ message: Message; lease: Lease }> = [];
    for (const message of messages) {
      const held = this.#byId.get(message.MessageId ?? "");
      if (held) {
        held.renew(message.ReceiptHandle ?? held.receipt, this.#now() + visibilitySeconds * 1000);
        this.#o.logger.info(
          { messageId: held.id, receiveCount: message.Attributes?.ApproximateReceiveCount },
          "received again while still in hand (its visibility had lapsed); its handling under way keeps it",
        );
        continue;
      }
      const lease = new Lease(message, this.#now() + visibilitySeconds * 1000, () => this.receivesLanded());
      this.#byId.set(lease.id, lease);
      fresh.push({ message, lease });
    }
    this.#schedule();
    return fresh;
  }

  /** Waits until every message of `lease`'s group taken into hand before it has been handled. */
  async turn(lease: Lease): Promise<void> {
    if (lease.group === undefined) return;
    const earlier: Lease[] = [];
    for (const other of this.#byId.values()) {
      if (other === lease) break; // a Map iterates in insertion order: the rest came later
      if (other.group === lease.group) earlier.push(other);
    }
    await Promise.all(earlier.map((l) => l.handled));
  }

  /** Out of hand: its settlement has landed. */
  release(lease: Lease): void {
    if (this.#byId.get(lease.id) === lease) this.#byId.delete(lease.id);
    lease.endRelease();
    if (this.#byId.size === 0) this.#unschedule();
  }

  /** Resolves once the extension under way (if any) has been answered: a settlement that sets a visibility goes after it. */
  extensionsLanded(): Promise<unknown> {
    return this.#extending;
  }

  /** Stops extending (at stop, once every loop has ended). */
  close(): void {
    this.#unschedule();
  }

  #schedule(): void {
    if (this.#timer !== undefined || this.#byId.size === 0) return;
    this.#timer = setInterval(() => void this.#extend(), (this.#visibilitySeconds * 1000) / 3);
  }

  #unschedule(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /** One extension of everything in hand but what is setting its own visibility. */
  async #extend(): Promise<void> {
    const now = this.#now();
    const leases = [...this.#byId.values()].filter((l) => l.settling !== "visibility");
    for (const l of leases) {
      // Refused, and no receive since brought a new receipt handle: another consumer has it.
      if (l.refused?.receipt === l.receipt)
        this.#o.logger.warn(
          { messageId: l.id, code: l.refused.code, message: l.refused.message },
          "could not extend the visibility of a message in hand; another consumer of the queue may be handling it",
        );
      l.refused = undefined;
      if (now > l.hiddenUntil && !l.lapsed) {
        l.lapsed = true;
        this.#o.logger.info(
          { messageId: l.id, lateMs: Math.round(now - l.hiddenUntil) },
          "the visibility of a message in hand lapsed (the process was busy); if the queue hands it out again, its handling under way keeps it",
        );
      }
    }
    const sent = this.#send(leases);
    this.#extending = sent;
    await sent;
  }

  async #send(leases: readonly Lease[]): Promise<void> {
    const seconds = this.#visibilitySeconds;
    for (let i = 0; i < leases.length; i += MAX_ENTRIES) {
      const chunk = leases.slice(i, i + MAX_ENTRIES).map((lease) => ({ lease, receipt: lease.receipt }));
      const sentAt = this.#now();
      try {
        const { client, sdk } = await this.#o.sqs();
        const out = await client.send(
          new sdk.ChangeMessageVisibilityBatchCommand({
            QueueUrl: this.#o.queueUrl,
            Entries: chunk.map((c, j) => ({ Id: String(j), ReceiptHandle: c.receipt, VisibilityTimeout: seconds })),
          }),
        );
        const failed = new Map((out.Failed ?? []).map((f) => [Number(f.Id), f]));
        chunk.forEach((c, j) => {
          const f = failed.get(j);
          if (!f) c.lease.hiddenUntil = Math.max(c.lease.hiddenUntil, sentAt + seconds * 1000);
          // After a lapse the queue may have handed it to one of this poller's own receives, whose
          // answer (its new receipt handle) may not have been read yet: judged at the next extension.
          else if (c.lease.receipt === c.receipt) c.lease.refused = { receipt: c.receipt, code: f.Code, message: f.Message };
        });
      } catch (error) {
        this.#o.logger.warn({ error: (error as Error).message }, "could not extend the visibility of the messages in hand");
      }
    }
  }
}
