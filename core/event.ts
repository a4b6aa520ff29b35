// The key event: the only thing that crosses from the bridge to the functions.
// It names an object and why it was announced; it never says what to do with it
// (level-triggered). Since v2 it also carries what the bridge knows, so a function need not read
// it again: the object as the bridge saw it (up to a size cap; its owner can turn bodies off) and
// the keys of the object's current children, from the bridge's keys-only index.
import { createHash } from "node:crypto";
import { z } from "zod";
import { zodLine } from "./config-error.ts";

/** Largest serialized event the contract allows: SQS takes 256 KiB per message, with attributes. */
export const MAX_EVENT_BYTES = 240 * 1024;
/** Largest the naming part may be (everything but the object, the children's keys and the trace context). */
export const MAX_KEY_BYTES = 1024;
const EVENT_TOO_LARGE = `a key event must serialize to at most ${MAX_EVENT_BYTES} bytes`;
const bytesOf = (e: unknown): number => Buffer.byteLength(JSON.stringify(e), "utf8");
/** The label every child carries, naming its parent's uid: the bridge watches children with it. */
export const PARENT_UID_LABEL = "crdfn.io/parent-uid";
/** A W3C traceparent a writer may put on an object: the bridge continues its trace rather than start one. */
export const TRACEPARENT_ANNOTATION = "crdfn.io/traceparent";
/** W3C traceparent: version 00, a 32-hex trace id, a 16-hex parent span id, the flags. */
const traceparentSchema = z.string().regex(/^00-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}$/);
/** The W3C limit for tracestate. */
const MAX_TRACESTATE_CHARS = 512;
/**
 * What a trace context can add to a serialized event at most: a sender reserves it under the
 * size cap before it injects one (withinCap), so the context never pushes an event over it.
 */
export const TRACE_CONTEXT_BYTES = Buffer.byteLength(
  JSON.stringify({ traceparent: `00-${"0".repeat(32)}-${"0".repeat(16)}-00`, tracestate: "t".repeat(MAX_TRACESTATE_CHARS) }),
  "utf8",
);
/** A hash of a child as the function last applied it: equal hashes, nothing to apply. */
export const APPLIED_HASH_ANNOTATION = "crdfn.io/applied-hash";
/**
 * The parent's metadata.generation a child was last applied from: a fence the generated admission
 * policy keeps from moving backwards (core/fence.ts). Not part of the applied hash.
 */
export const PARENT_GENERATION_ANNOTATION = "crdfn.io/parent-generation";

/** An object's name: a DNS subdomain, as most kinds name their objects. */
export const dnsSubdomain = z
  .string()
  .min(1)
  .max(253)
  .regex(/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/);
/** A namespace's name: a DNS label. */
export const dnsLabel = z
  .string()
  .min(1)
  .max(63)
  .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/);
/** A Kind: a letter, then letters and digits (as the API server accepts one in a CRD). */
const kindName = z
  .string()
  .min(1)
  .max(63)
  .regex(/^[A-Za-z][A-Za-z0-9]*$/);

/** A cluster's id as events carry it (the bridge's CRDFN_CLUSTER, the functions' registry keys). */
export const clusterIdSchema = z
  .string()
  .min(1)
  .max(63)
  .regex(/^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/, "must be a short name (letters, digits, - _ .)");

export const eventTypes = ["ADDED", "MODIFIED", "DELETED", "RESYNC"] as const;

/** One current child of the announced object, as the bridge's index knows it. */
export const childKeySchema = z.strictObject({
  apiVersion: z.string().min(1).max(100),
  kind: kindName,
  namespace: dnsLabel.optional(),
  name: z.string().min(1).max(253),
  uid: z.string().min(1).max(64),
  resourceVersion: z.string().min(1).max(32),
  /**
   * The child's crdfn.io/applied-hash, when the last write to its content was the function's own
   * apply; absent when anyone else wrote it since (then the function applies again).
   */
  appliedHash: z.string().min(1).max(64).optional(),
  /** The child's crdfn.io/parent-generation (its fence), when it carries a valid one. */
  parentGeneration: z.number().int().nonnegative().optional(),
});
export type ChildKey = z.infer<typeof childKeySchema>;

const keySchema = z.strictObject({
  /**
   * 3: signed (`kid`, `mac`: core/event-auth.ts), may carry `object` and `children`; 2: the same
   * unsigned, 1: names the object only (older bridges, old dead letters). Functions handle only
   * a v3 event whose MAC verifies.
   */
  v: z.union([z.literal(1), z.literal(2), z.literal(3)]),
  /** Which cluster the object lives in, so one function fleet can serve many. */
  cluster: clusterIdSchema,
  /** API group; "" for the core group. */
  group: z.union([z.literal(""), dnsSubdomain]),
  version: z
    .string()
    .min(1)
    .max(20)
    .regex(/^v[0-9a-z]+$/),
  plural: dnsLabel,
  kind: kindName,
  namespace: dnsLabel.optional(),
  name: z
    .string()
    .min(1)
    .max(253)
    .regex(/^[a-z0-9A-Z]([-a-zA-Z0-9._:]*[a-zA-Z0-9])?$/),
  uid: z.string().min(1).max(64),
  resourceVersion: z.string().min(1).max(32),
  generation: z.number().int().nonnegative(),
  type: z.enum(eventTypes),
  /** Why the bridge announced it: a short machine word (watch, relist, resync, child, …). */
  reason: z
    .string()
    .max(32)
    .regex(/^[a-z][a-z0-9:-]*$/)
    .optional(),
  /** When the bridge saw the change (RFC 3339), for queue-lag metrics only. */
  observedAt: z.iso.datetime({ offset: true }),
  /**
   * The change's trace (W3C trace context), when the bridge traces: under the MAC like the rest,
   * so a function continues only a context its cluster's bridge wrote. Absent: untraced.
   */
  traceparent: traceparentSchema.optional(),
  tracestate: z.string().max(MAX_TRACESTATE_CHARS).optional(),
  /** v3: which of the cluster's keys made `mac` (keys rotate). */
  kid: z
    .string()
    .min(1)
    .max(32)
    .regex(/^[A-Za-z0-9][A-Za-z0-9._-]*$/)
    .optional(),
  /** v3: HMAC-SHA256 (base64url) over the rest of the event, by the cluster's bridge (core/event-auth.ts). */
  mac: z
    .string()
    .length(43)
    .regex(/^[A-Za-z0-9_-]+$/)
    .optional(),
});

export const keyEventSchema = keySchema
  .extend({
    /** The object at `resourceVersion`, without managedFields; absent above the bridge's size cap or when bodies are off. */
    object: z.looseObject({ metadata: z.looseObject({ name: z.string(), uid: z.string(), resourceVersion: z.string() }) }).optional(),
    /** Every current child of the owned kinds, by the bridge's index (a moment old, perhaps); absent: unknown. */
    children: z.array(childKeySchema).optional(),
  })
  .refine((e) => (e.v === 3) === (e.mac !== undefined) && (e.mac === undefined) === (e.kid === undefined), {
    message: "a v3 event carries kid and mac, an older one neither",
    path: ["mac"],
  })
  .refine((e) => e.object === undefined || (e.object.metadata.uid === e.uid && e.object.metadata.resourceVersion === e.resourceVersion), {
    message: "object must be the announced version (uid and resourceVersion)",
    path: ["object"],
  })
  // The trace context has a bound of its own (TRACE_CONTEXT_BYTES): it takes no room from the name.
  .refine(({ object: _object, children: _children, traceparent: _tp, tracestate: _ts, ...naming }) => bytesOf(naming) <= MAX_KEY_BYTES, {
    message: `the naming part of a key event must serialize to at most ${MAX_KEY_BYTES} bytes`,
  })
  .refine((e) => bytesOf(e) <= MAX_EVENT_BYTES, { message: EVENT_TOO_LARGE });

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
  if (!parsed.success) return { ok: false, error: zodLine(parsed.error) };
  return { ok: true, event: parsed.data };
}

/**
 * When a newer announcement of an object replaces one still waiting to be sent, the child
 * change the waiting one stood for must not be lost with it: the merged event keeps that reason.
 */
export function supersede(waiting: KeyEvent, newer: KeyEvent): KeyEvent {
  const reason = ownChangeOnly(newer) && !ownChangeOnly(waiting) && waiting.reason !== undefined ? { reason: waiting.reason } : {};
  // A body the waiting one carries for the very version the newer one names stays.
  const object =
    newer.object === undefined && waiting.object !== undefined && waiting.resourceVersion === newer.resourceVersion && waiting.uid === newer.uid
      ? { object: waiting.object }
      : {};
  return { ...newer, ...reason, ...object };
}

/** The reasons a bridge gives for an object's own change (as opposed to a child's, a resync…). */
const OWN_CHANGE_REASONS: ReadonlySet<string> = new Set(["watch", "list", "relist"]);
const ownChangeOnly = (e: Pick<KeyEvent, "reason">): boolean => e.reason !== undefined && OWN_CHANGE_REASONS.has(e.reason);

/** More children's keys than this never fit in an event: each serializes to 100 bytes at least (a one-letter name, a 36-character uid). */
export const MAX_CHILD_KEYS = Math.floor(MAX_EVENT_BYTES / 100);

/** An event and the bytes it serializes to, with the room its sender reserved (withinCap). */
export interface SizedEvent {
  event: KeyEvent;
  bytes: number;
}

/**
 * The event as the contract can carry it: without the body when body and keys exceed
 * MAX_EVENT_BYTES (the function reads the object), and without the children's keys too when the
 * keys alone exceed it (`children` absent: unknown, and the function lists them by the parent
 * label). A parent of any size is announced; only its naming part must fit. `reserveBytes`: room
 * for what is added before it is sent (a signature: core/event-auth.ts signatureBytes).
 */
export function withinCap(event: KeyEvent, reserveBytes = 0): SizedEvent {
  const cap = MAX_EVENT_BYTES - reserveBytes;
  const tooManyChildren = (event.children?.length ?? 0) > MAX_CHILD_KEYS;
  if (!tooManyChildren) {
    const bytes = bytesOf(event);
    if (bytes <= cap) return { event, bytes: bytes + reserveBytes };
  }
  const { object: _body, children, ...naming } = event;
  if (!tooManyChildren && children !== undefined) {
    const keysOnly = { ...naming, children };
    const bytes = bytesOf(keysOnly);
    if (bytes <= cap) return { event: keysOnly, bytes: bytes + reserveBytes };
  }
  return { event: naming, bytes: bytesOf(naming) + reserveBytes };
}

/**
 * The event as sent, checked against the contract. The body is checked for its identity only
 * (name, uid, resourceVersion: what the schema asks of it): it is the API server's own JSON and
 * most of the event, and parsing it whole copied it, then serialized it twice more for the size
 * checks, for every event the bridge sent (a tenth of its CPU in a cold start: bench:coldscale
 * --cpu-prof). Throws what keyEventSchema.parse throws, or an Error when too large.
 */
export function encodeKeyEvent(event: KeyEvent): string {
  const { object } = event;
  const metadata = object?.metadata as { name?: unknown; uid?: unknown; resourceVersion?: unknown } | undefined;
  keyEventSchema.parse(
    object === undefined
      ? event
      : { ...event, object: { metadata: metadata && { name: metadata.name, uid: metadata.uid, resourceVersion: metadata.resourceVersion } } },
  );
  const body = JSON.stringify(event);
  if (Buffer.byteLength(body, "utf8") > MAX_EVENT_BYTES) throw new Error(EVENT_TOO_LARGE);
  return body;
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
