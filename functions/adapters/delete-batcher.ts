// The poller's deletes of one queue, gathered into DeleteMessageBatch calls across its receive
// loops. At a few dozen messages per second every receive returns one message, so deleting per
// receive costs one request per message: on ElasticMQ that is ~2.7 ms of its CPU, on SQS a
// billed request (`npm run bench`). A handled message waits up to `windowMs` for others; the
// loop that handled it does not wait at all (it is told when the delete is answered: until then
// the message is in hand, leases.ts). The price: a FIFO group's next message, which the queue
// holds back until this one is deleted, may wait up to `windowMs` longer.
import type { Logger } from "pino";
import type { SqsClientSource } from "../runtime/sqs-client.ts";

/** SQS's most entries per DeleteMessageBatch. */
const MAX_ENTRIES = 10;

export interface DeleteBatcherOptions {
  sqs: SqsClientSource;
  queueUrl: string;
  windowMs: number;
  logger: Logger;
}

/** A message to delete: its receipt handle is read when the delete is sent (a message received again while in hand has a new one). */
export interface Deletable {
  readonly receipt: string;
  /** Resolves once a receive under way has brought a new receipt handle, or none can any more (leases.ts). */
  renewal(): Promise<void>;
}

interface Waiting {
  item: Deletable;
  done: () => void;
}

export class DeleteBatcher {
  readonly #options: DeleteBatcherOptions;
  #waiting: Waiting[] = [];
  #timer: NodeJS.Timeout | undefined;
  readonly #inflight = new Set<Promise<void>>();

  constructor(options: DeleteBatcherOptions) {
    this.#options = options;
  }

  /**
   * Deletes these messages soon; resolves once each delete has been answered (the message is then
   * out of hand). A failure only means a redelivery, which a level-triggered reconcile absorbs.
   */
  add(items: readonly Deletable[]): Promise<void> {
    const answered = items.map((item) => new Promise<void>((done) => this.#waiting.push({ item, done })));
    while (this.#waiting.length >= MAX_ENTRIES) this.#send(this.#waiting.splice(0, MAX_ENTRIES));
    if (this.#waiting.length > 0 && this.#timer === undefined) this.#timer = setTimeout(() => this.#flush(), this.#options.windowMs);
    return Promise.all(answered).then(() => undefined);
  }

  /** Sends what waits and resolves once every delete has been answered (at stop). */
  async drain(): Promise<void> {
    this.#flush();
    while (this.#inflight.size > 0) await Promise.all(this.#inflight);
  }

  #flush(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    while (this.#waiting.length > 0) this.#send(this.#waiting.splice(0, MAX_ENTRIES));
  }

  #send(batch: Waiting[]): void {
    const entries = batch.map((w, i) => ({ w, receipt: w.item.receipt, id: String(i) }));
    const again: Waiting[] = [];
    const sent = this.#options
      .sqs()
      .then(({ client, sdk }) =>
        client.send(
          new sdk.DeleteMessageBatchCommand({ QueueUrl: this.#options.queueUrl, Entries: entries.map((e) => ({ Id: e.id, ReceiptHandle: e.receipt })) }),
        ),
      )
      .then(async (out) => {
        const refused = (out.Failed ?? []).map((f) => ({ f, e: entries.find((x) => x.id === f.Id) }));
        // Received again by a receive whose answer may still be on its way (the queue answers the
        // refusal at once): judged once that receive has been taken.
        await Promise.all(refused.map(({ e }) => (e && e.w.item.receipt === e.receipt ? e.w.item.renewal() : Promise.resolve())));
        for (const { f, e } of refused) {
          // Received again while the delete was on its way: the queue honours only the new receipt handle.
          if (e && e.w.item.receipt !== e.receipt) again.push(e.w);
          else this.#options.logger.warn({ code: f.Code, message: f.Message }, "delete failed; the message will be redelivered");
        }
      })
      .catch((error: unknown) => this.#options.logger.warn({ error: (error as Error).message }, "delete failed; the messages will be redelivered"))
      .finally(() => {
        this.#inflight.delete(sent);
        for (const { w } of entries) if (!again.includes(w)) w.done();
        if (again.length > 0) this.#send(again);
      });
    this.#inflight.add(sent);
  }
}
