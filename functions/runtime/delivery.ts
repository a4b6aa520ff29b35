// What a function makes of a queue message, decided once, by the adapter that received it,
// before anything else looks at it: the key event it carries, parsed and proven to come from the
// cluster's bridge, for an object this function serves; or why it can never be handled. This is
// the ONE place a message is judged a dead letter for what it is (malformed, unverified, a cluster
// or resource not served here); what becomes of it on the queue is the adapters' (settle.ts).
// The message itself, and how each source's shape becomes one, is clients/queue-message.ts.
import type { Logger } from "pino";
import { verifyKeyEvent, type EventKeyring } from "../../core/event-auth.ts";
import { parseKeyEvent, type KeyEvent } from "../../core/event.ts";
import type { QueueMessage } from "../../clients/queue-message.ts";

export type { QueueMessage };

/** Message attribute: when a message was first deferred for an outage (epoch ms), carried by its re-sent copies. */
export const DEFERRED_SINCE_ATTRIBUTE = "crdfn-deferred-since";
/** Message attribute: how many times it was re-sent for an outage. */
export const DEFERRALS_ATTRIBUTE = "crdfn-deferrals";

/** A message whose key event is well-formed, verified and served here. */
export interface Received {
  ok: true;
  message: QueueMessage;
  event: KeyEvent;
  /** Delivered for the first time (not held back, not re-sent): its body may stand for a read. */
  firstDelivery: boolean;
}

/** A message that can never be handled: the queue's redrive policy moves it to the dead-letter queue. */
export interface Refused {
  ok: false;
  message: QueueMessage;
  outcome: { result: "dead-letter"; detail: string };
}

export type Delivery = Received | Refused;

/** What a function process serves: the keys of each cluster it serves, and the resources. */
export interface ServedEvents {
  /** The keys a cluster's events are signed with; undefined for a cluster not served here. */
  keysOf(cluster: string): EventKeyring | undefined;
  resources: ReadonlyArray<{ group: string; plural: string }>;
}

const resourceKey = (group: string, plural: string): string => (group === "" ? plural : `${plural}.${group}`);

/**
 * Judges each message once. Whatever is refused is logged on its first receive only (each later
 * receive counts it towards the queue's dead-letter limit, and says so at debug level).
 */
export function createReceiver(served: ServedEvents, logger: Logger): (message: QueueMessage) => Delivery {
  const resources = new Set(served.resources.map((r) => resourceKey(r.group, r.plural)));
  return (message) => {
    const firstReceive = (message.receiveCount ?? 1) <= 1;
    const refuse = (detail: string, fields: Record<string, unknown>, line: string): Refused => {
      if (firstReceive) logger.error({ messageId: message.id, ...fields }, `${line}; leaving it for the dead-letter queue`);
      else logger.debug({ messageId: message.id, receiveCount: message.receiveCount }, `${line}, received again`);
      return { ok: false, message, outcome: { result: "dead-letter", detail } };
    };
    const parsed = parseKeyEvent(message.body);
    if (!parsed.ok) return refuse("malformed key event", { error: parsed.error }, "malformed key event");
    const event = parsed.event;
    const object = `${event.kind} ${event.namespace ? `${event.namespace}/` : ""}${event.name}`;
    const keys = served.keysOf(event.cluster);
    if (!keys)
      return refuse(
        `cluster ${event.cluster} is not served here`,
        { cluster: event.cluster, object },
        `key event for cluster "${event.cluster}", which is not in the registry`,
      );
    // Before anything uses the body: whoever may send to the queue is not thereby the bridge.
    const proof = verifyKeyEvent(event, keys);
    if (!proof.ok)
      return refuse(
        proof.message,
        { cluster: event.cluster, object, kid: event.kid ?? null },
        `key event for ${object} of cluster "${event.cluster}" refused: ${proof.message}`,
      );
    const resource = resourceKey(event.group, event.plural);
    if (!resources.has(resource))
      return refuse("not a resource served here", { resource, served: [...resources] }, `key event for ${object}, a resource no operator here serves`);
    return { ok: true, message, event, firstDelivery: firstReceive && message.attributes?.[DEFERRED_SINCE_ATTRIBUTE] === undefined };
  };
}
