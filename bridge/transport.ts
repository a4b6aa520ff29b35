// What the bridge's publisher needs of a queue service: send a batch of messages to one
// destination, each in its object's ordered stream, and tell whether a destination exists. Two
// implementations: SQS FIFO (sqs-transport.ts: the stream is the MessageGroupId) and Pub/Sub
// (pubsub-transport.ts: the stream is the ordering key). The coalescing, backpressure and
// retries above it (publisher.ts) are the same for both.

/** One key event, ready to send. */
export interface OutgoingMessage {
  /** The key event's JSON (core/event.ts encodeKeyEvent). */
  body: string;
  /** The object's ordered stream (core/event.ts messageGroupId): SQS's MessageGroupId, Pub/Sub's ordering key. */
  stream: string;
  /** uid + resourceVersion + cause (core/event.ts deduplicationId): SQS drops a repeat; Pub/Sub carries it as an attribute. */
  deduplicationId: string;
  /** The cluster the event names, also outside the body (a Pub/Sub attribute), for filters and logs. */
  cluster: string;
}

export type SendResult =
  | { ok: true }
  /** `missing`: the destination does not exist (a setting a person must fix). */
  | { ok: false; reason: string; missing?: boolean };

export interface QueueTransport {
  /** What a destination is called in log lines and problems: "queue" or "topic". */
  readonly noun: "queue" | "topic";
  /** Messages per request at most. */
  readonly maxBatch: number;
  /**
   * Part-filled batches go at most one per this many ms on average, a few back to back after a
   * quiet spell (send-credit.ts): under a faster stream, fewer, fuller requests when a request
   * is what is billed. 0: never waits.
   */
  readonly lingerMs: number;
  /**
   * One request to one destination. Resolves with a result per message, in order; rejects when
   * the request failed as a whole (the service unreachable, every message refused alike).
   */
  send(destination: string, messages: readonly OutgoingMessage[]): Promise<SendResult[]>;
  /** true, false (a person must create it), or undefined: cannot tell (no permission to look, the service unreachable). */
  exists(destination: string, signal: AbortSignal): Promise<boolean | undefined>;
  /** Sends nothing more and closes connections. */
  close(): Promise<void>;
}

/** What a transport rejects with when the whole request failed. */
export class TransportError extends Error {
  /** A short word for the failures metric (the SDK's error name, the gRPC status). */
  readonly reason: string;
  /** The HTTP status or gRPC code the service answered, if it answered. */
  readonly status: number | undefined;
  /** The destination does not exist. */
  readonly missing: boolean;
  constructor(message: string, o: { reason: string; status?: number; missing?: boolean }) {
    super(message);
    this.name = "TransportError";
    this.reason = o.reason;
    this.status = o.status;
    this.missing = o.missing ?? false;
  }
}
