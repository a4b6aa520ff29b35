// A queue message as every adapter hands it to the runtime (SQS, Lambda record, CloudEvent).

export interface QueueMessage {
  id: string;
  body: string;
  /** String message attributes (the requeue due time travels here, outside the contract body). */
  attributes?: Record<string, string>;
  /** ApproximateReceiveCount, when the source reports it. */
  receiveCount?: number;
}

/** Message attribute: epoch milliseconds before which a delayed re-delivery must not reconcile. */
export const DUE_AT_ATTRIBUTE = "crdfn-due-at";
