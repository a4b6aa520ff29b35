// What the runtime reads off a queue message besides its body. The message itself, and how each
// source's shape becomes one, is clients/queue-message.ts.
import { parseKeyEvent, type ParseResult } from "../../core/event.ts";
import type { QueueMessage } from "../../clients/queue-message.ts";

export type { QueueMessage };

// A memo of a pure function, not shared state: what it holds goes with its message object.
const parsedMessages = new WeakMap<QueueMessage, ParseResult>();

/**
 * The message's key event, parsed once however many parts of a function process read it (the
 * outage circuit, both dispatchers, the runtime): zod parsing was ~3 % of a busy function
 * process's CPU, most of it repeated. A message is not changed once received.
 */
export function keyEventOf(message: QueueMessage): ParseResult {
  let result = parsedMessages.get(message);
  if (!result) parsedMessages.set(message, (result = parseKeyEvent(message.body)));
  return result;
}


/** Message attribute: when a message was first deferred for an outage (epoch ms), carried by its re-sent copies. */
export const DEFERRED_SINCE_ATTRIBUTE = "crdfn-deferred-since";
/** Message attribute: how many times it was re-sent for an outage. */
export const DEFERRALS_ATTRIBUTE = "crdfn-deferrals";
