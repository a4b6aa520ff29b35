// What the runtime reads off a queue message besides its body. The message itself, and how each
// source's shape becomes one, is clients/queue-message.ts.
export type { QueueMessage } from "../../clients/queue-message.ts";

/** Message attribute: epoch milliseconds before which a delayed re-delivery must not reconcile. */
export const DUE_AT_ATTRIBUTE = "crdfn-due-at";
