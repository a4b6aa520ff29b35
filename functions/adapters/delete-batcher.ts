// The poller's deletes of one queue, gathered into DeleteMessageBatch calls across its receive
// loops. At a few dozen messages per second every receive returns one message, so deleting per
// receive costs one request per message: on ElasticMQ that is ~2.7 ms of its CPU, on SQS a
// billed request (`npm run bench`). A handled message waits up to `windowMs` for others; the
// loop that handled it does not wait at all. The price: a FIFO group's next message, which
// the queue holds back until this one is deleted, may wait up to `windowMs` longer.
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

export class DeleteBatcher {
  readonly #options: DeleteBatcherOptions;
  #waiting: string[] = [];
  #timer: NodeJS.Timeout | undefined;
  readonly #inflight = new Set<Promise<void>>();

  constructor(options: DeleteBatcherOptions) {
    this.#options = options;
  }

  /** Deletes these messages soon; a failure only means a redelivery, which a level-triggered reconcile absorbs. */
  add(receiptHandles: readonly string[]): void {
    this.#waiting.push(...receiptHandles);
    while (this.#waiting.length >= MAX_ENTRIES) this.#send(this.#waiting.splice(0, MAX_ENTRIES));
    if (this.#waiting.length > 0 && this.#timer === undefined) this.#timer = setTimeout(() => this.#flush(), this.#options.windowMs);
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

  #send(handles: string[]): void {
    const sent = this.#options
      .sqs()
      .then(({ client, sdk }) =>
        client.send(
          new sdk.DeleteMessageBatchCommand({ QueueUrl: this.#options.queueUrl, Entries: handles.map((h, i) => ({ Id: String(i), ReceiptHandle: h })) }),
        ),
      )
      .then((out) => {
        for (const f of out.Failed ?? []) this.#options.logger.warn({ code: f.Code, message: f.Message }, "delete failed; the message will be redelivered");
      })
      .catch((error: unknown) => this.#options.logger.warn({ error: (error as Error).message }, "delete failed; the messages will be redelivered"))
      .finally(() => this.#inflight.delete(sent));
    this.#inflight.add(sent);
  }
}
