// The key event: the only thing that crosses from the bridge to the functions.
// It names an object and why it was announced; it never says what to do with it
// (level-triggered), and carries nothing a reader of the queue should not see.
import { createHash } from "node:crypto";
import { z } from "zod";

/** Largest serialized event the contract allows; SQS allows 256 KiB, we promise far less. */
export const MAX_EVENT_BYTES = 1024;

const dnsSubdomain = z.string().max(253).regex(/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/);
const dnsLabel = z.string().min(1).max(63).regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/);

/** A cluster's id as events carry it (the bridge's CRDFN_CLUSTER, the functions' registry keys). */
export const clusterIdSchema = z.string().min(1).max(63).regex(/^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/, "must be a short name (letters, digits, - _ .)");

export const eventTypes = ["ADDED", "MODIFIED", "DELETED", "RESYNC"] as const;
export type EventType = (typeof eventTypes)[number];

export const keyEventSchema = z
  .strictObject({
    v: z.literal(1),
    /** Which cluster the object lives in, so one function fleet can serve many. */
    cluster: clusterIdSchema,
    /** API group; "" for the core group. */
    group: z.union([z.literal(""), dnsSubdomain]),
    version: z.string().min(1).max(20).regex(/^v[0-9a-z]+$/),
    plural: dnsLabel,
    kind: z.string().min(1).max(63).regex(/^[A-Za-z][A-Za-z0-9]*$/),
    namespace: dnsLabel.optional(),
    name: z.string().min(1).max(253).regex(/^[a-z0-9A-Z]([-a-zA-Z0-9._:]*[a-zA-Z0-9])?$/),
    uid: z.string().min(1).max(64),
    resourceVersion: z.string().min(1).max(32),
    generation: z.number().int().nonnegative(),
    type: z.enum(eventTypes),
    /** Why the bridge announced it: a short machine word (watch, relist, resync, child, …). */
    reason: z.string().max(32).regex(/^[a-z][a-z0-9:-]*$/).optional(),
    /** When the bridge saw the change (RFC 3339), for queue-lag metrics only. */
    observedAt: z.iso.datetime({ offset: true }),
  })
  .refine((e) => Buffer.byteLength(JSON.stringify(e), "utf8") <= MAX_EVENT_BYTES, {
    message: `a key event must serialize to at most ${MAX_EVENT_BYTES} bytes`,
  });

export type KeyEvent = z.infer<typeof keyEventSchema>;

export type ParseResult = { ok: true; event: KeyEvent } | { ok: false; error: string };

/** Parses a queue message body. Never throws: a malformed message is a value, to be dead-lettered. */
export function parseKeyEvent(body: string): ParseResult {
  let raw: unknown;
  try {
    raw = JSON.parse(body);
  } catch (e) {
    return { ok: false, error: `body is not JSON: ${(e as Error).message}` };
  }
  const parsed = keyEventSchema.safeParse(raw);
  if (!parsed.success) return { ok: false, error: z.prettifyError(parsed.error).replace(/\n/g, "; ") };
  return { ok: true, event: parsed.data };
}

/** The reasons a bridge gives for an object's own change (as opposed to a child's, a resync…). */
const OWN_CHANGE_REASONS: ReadonlySet<string> = new Set(["watch", "list", "relist"]);

/**
 * Whether the event stands for the announced object's own changes only. A reconcile of such an
 * event may read the children from the API server's watch cache at the event's resourceVersion
 * or later: a child change it might not show yet has an event of its own behind this one. Any
 * other event (a child changed, a resync, a requeue, no reason) reads them from etcd.
 */
export function ownChangeOnly(e: Pick<KeyEvent, "reason">): boolean {
  return e.reason !== undefined && OWN_CHANGE_REASONS.has(e.reason);
}

/**
 * When a newer announcement of an object replaces one still waiting to be sent, the child
 * change the waiting one stood for must not be lost with it: the merged event keeps that reason.
 */
export function supersede(waiting: KeyEvent, newer: KeyEvent): KeyEvent {
  return ownChangeOnly(newer) && !ownChangeOnly(waiting) && waiting.reason !== undefined ? { ...newer, reason: waiting.reason } : newer;
}

export function encodeKeyEvent(event: KeyEvent): string {
  return JSON.stringify(keyEventSchema.parse(event));
}

/** Identity of the object an event names, stable across its lifetime (not its uid: a re-created object is the same key). */
export function objectKey(e: Pick<KeyEvent, "cluster" | "group" | "plural" | "namespace" | "name">): string {
  return `${e.cluster}/${e.group}/${e.plural}/${e.namespace ?? ""}/${e.name}`;
}

const sha256 = (s: string): string => createHash("sha256").update(s).digest("hex");

/**
 * FIFO MessageGroupId: one group per object, so one object's events are handled in order and
 * different objects in parallel. SQS caps it at 128 characters and names reach 253, so it is a
 * readable prefix plus a hash of the full key.
 */
export function messageGroupId(e: Pick<KeyEvent, "cluster" | "group" | "plural" | "namespace" | "name">): string {
  const readable = `${e.plural}.${e.namespace ?? "_"}.${e.name}`.slice(0, 60);
  return `${readable}~${sha256(objectKey(e)).slice(0, 40)}`;
}

/**
 * FIFO MessageDeduplicationId: the same object version announced twice (a relist, a restart)
 * is delivered once. `cause` distinguishes announcements of one parent version for different
 * reasons (a child changed, a resync), which must not be swallowed.
 */
export function deduplicationId(e: Pick<KeyEvent, "uid" | "resourceVersion">, cause = ""): string {
  return sha256(`${e.uid}:${e.resourceVersion}:${cause}`);
}
