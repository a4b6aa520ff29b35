// What a function makes of a queue message, decided once, by the adapter that received it,
// before anything else looks at it: the key event it carries, proven to come from the cluster's
// bridge and then parsed, for an object this function serves; or why it can never be handled.
// This is the ONE place a message is judged a dead letter for what it is (malformed, unverified,
// a cluster or resource not served here); what becomes of it on the queue is the adapters'
// (settle.ts). The message itself, and how each source's shape becomes one, is
// clients/queue-message.ts.
import type { Logger } from "pino";
import { deferralSeal, operatorResource, verifyDeferralSeal, verifyKeyEvent, type EventKeyring, type EventSecret } from "../../core/event-auth.ts";
import { parseKeyEvent, type KeyEvent } from "../../core/event.ts";
import type { QueueMessage } from "../../clients/queue-message.ts";

export type { QueueMessage };

/** Message attribute: when a message was first deferred for an outage (epoch ms), carried by its re-sent copies. */
export const DEFERRED_SINCE_ATTRIBUTE = "crdfn-deferred-since";
/** Message attribute: how many times it was re-sent for an outage. */
export const DEFERRALS_ATTRIBUTE = "crdfn-deferrals";
/** Message attribute: the MAC of the two above, bound to the event's own MAC (core/event-auth.ts deferralSeal). */
export const DEFERRAL_MAC_ATTRIBUTE = "crdfn-deferral-mac";

/** A message whose key event is well-formed, verified and served here. */
export interface Received {
  ok: true;
  /** The message, its deferral attributes only where their MAC verifies (settle.ts reads them). */
  message: QueueMessage;
  event: KeyEvent;
  /** Delivered for the first time (not held back, not re-sent): its body may stand for a read. */
  firstDelivery: boolean;
  /** When it was received (epoch ms): where its time in the queue ends, and its handling's span starts. */
  receivedAt?: number;
  /** How long proving its MAC took (ms): crdfn.verify_ms on its handling's span. */
  verifyMs?: number;
  /** The deferral attributes of a re-sent copy of this message, with their MAC (settle.ts). */
  deferralAttributes(since: number, deferrals: number): Record<string, string>;
}

/** A message that can never be handled: the queue's redrive policy moves it to the dead-letter queue. */
export interface Refused {
  ok: false;
  message: QueueMessage;
  outcome: { result: "dead-letter"; detail: string };
}

export type Delivery = Received | Refused;

/** What a function process serves: the keys of each operator of each cluster it serves, and the resources. */
export interface ServedEvents {
  /**
   * The keys an operator's events of a cluster are signed with (`resource`: `<plural>.<group>`);
   * undefined for a cluster or an operator not served here.
   */
  keysOf(cluster: string, resource: string): EventKeyring | undefined;
  resources: ReadonlyArray<{ group: string; plural: string }>;
}

/** What a message's JSON says before the schema has read it: only what finds the key, each a string or absent. */
function naming(body: string): { raw: Record<string, unknown>; cluster: string; resource: string; object: string } | undefined {
  let raw: unknown;
  try {
    raw = JSON.parse(body);
  } catch {
    return undefined;
  }
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) return undefined;
  const r = raw as Record<string, unknown>;
  const text = (v: unknown): string | undefined => (typeof v === "string" ? v.slice(0, 253) : undefined);
  const [cluster, group, plural] = [text(r.cluster), text(r.group), text(r.plural)];
  if (cluster === undefined || group === undefined || plural === undefined) return undefined;
  const namespace = text(r.namespace);
  const object = `${text(r.kind) ?? "?"} ${namespace ? `${namespace}/` : ""}${text(r.name) ?? "?"}`;
  return { raw: r, cluster, resource: operatorResource({ group, plural }), object };
}

/**
 * Judges each message once. Whatever is refused is logged on its first receive only (each later
 * receive counts it towards the queue's dead-letter limit, and says so at debug level).
 */
export function createReceiver(served: ServedEvents, logger: Logger): (message: QueueMessage) => Delivery {
  const resources = new Set(served.resources.map(operatorResource));
  return (message) => {
    const receivedAt = Date.now();
    const firstReceive = (message.receiveCount ?? 1) <= 1;
    const refuse = (detail: string, fields: Record<string, unknown>, line: string): Refused => {
      if (firstReceive) logger.error({ messageId: message.id, ...fields }, `${line}; leaving it for the dead-letter queue`);
      else logger.debug({ messageId: message.id, receiveCount: message.receiveCount }, `${line}, received again`);
      return { ok: false, message, outcome: { result: "dead-letter", detail } };
    };
    const named = naming(message.body);
    if (!named) return refuse("malformed key event", { error: "not a JSON object naming its cluster, group and plural" }, "malformed key event");
    const { raw, cluster, resource, object } = named;
    if (!resources.has(resource))
      return refuse("not a resource served here", { resource, served: [...resources] }, `key event for ${object}, a resource no operator here serves`);
    const keys = served.keysOf(cluster, resource);
    if (!keys) return refuse(`cluster ${cluster} is not served here`, { cluster, object }, `key event for cluster "${cluster}", which is not in the registry`);
    // Before the schema reads the body: whoever may send to the queue is not thereby the bridge.
    const verifying = performance.now();
    const proof = verifyKeyEvent(raw, keys);
    const verifyMs = performance.now() - verifying;
    if (!proof.ok)
      return refuse(
        proof.message,
        { cluster, object, kid: typeof raw.kid === "string" ? raw.kid.slice(0, 40) : null },
        `key event for ${object} of cluster "${cluster}" refused: ${proof.message}`,
      );
    const parsed = parseKeyEvent(message.body);
    if (!parsed.ok) return refuse("malformed key event", { error: parsed.error }, "malformed key event");
    const event = parsed.event;
    // Verified: both are strings, and the kid is one of `keys`.
    const mac = event.mac!;
    const secret = keys.get(event.kid!)!;
    const deferral = deferralOf(message, mac, secret);
    if (deferral === "unproven")
      logger.warn({ messageId: message.id, object }, "deferral attributes whose MAC does not verify: ignored, and the object is read afresh");
    return {
      ok: true,
      message: deferral === "proven" ? message : withoutDeferral(message),
      event,
      // Safe whichever way a sender tampered: a copy that claims to have been deferred, proven or
      // not, is no first delivery, so its body never stands for a read; one that hides its
      // deferral is at worst an event re-sent whole, which the bridge's MAC already allows anyone
      // who saw it (the fences and the uid check stand there). Values not proven are dropped
      // rather than refused: a copy re-sent by a function from before these MACs (an upgrade) is
      // then handled afresh instead of dead-lettered; its deferral limit starts again.
      firstDelivery: firstReceive && deferral === "none",
      receivedAt,
      verifyMs,
      deferralAttributes: (since, deferrals) => {
        const [s, d] = [String(since), String(deferrals)];
        return { [DEFERRED_SINCE_ATTRIBUTE]: s, [DEFERRALS_ATTRIBUTE]: d, [DEFERRAL_MAC_ATTRIBUTE]: deferralSeal(mac, s, d, secret) };
      },
    };
  };
}

const DEFERRAL_ATTRIBUTES = [DEFERRED_SINCE_ATTRIBUTE, DEFERRALS_ATTRIBUTE, DEFERRAL_MAC_ATTRIBUTE];

/** Whether the message carries deferral attributes, and whether their MAC (with the key that verified its event) proves them. */
function deferralOf(message: QueueMessage, eventMac: string, secret: EventSecret): "none" | "proven" | "unproven" {
  const a = message.attributes ?? {};
  if (DEFERRAL_ATTRIBUTES.every((name) => a[name] === undefined)) return "none";
  const [since, deferrals, seal] = [a[DEFERRED_SINCE_ATTRIBUTE], a[DEFERRALS_ATTRIBUTE], a[DEFERRAL_MAC_ATTRIBUTE]];
  if (since === undefined || deferrals === undefined || seal === undefined) return "unproven";
  return verifyDeferralSeal(eventMac, since, deferrals, seal, secret) ? "proven" : "unproven";
}

function withoutDeferral(message: QueueMessage): QueueMessage {
  const attributes = Object.fromEntries(Object.entries(message.attributes ?? {}).filter(([name]) => !DEFERRAL_ATTRIBUTES.includes(name)));
  return { ...message, attributes };
}
