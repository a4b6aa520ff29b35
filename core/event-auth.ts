// Proof that a key event came from its cluster's bridge, unchanged: an HMAC-SHA256 over the whole
// event (naming part, body, children's keys), with a key only that bridge and the functions hold.
// Whoever may merely send to the queue cannot make a function write what it made up. The proof
// travels inside the event body, so every transport, every deferral re-send and a dead-letter
// redrive carry it unchanged.
//
// Keys as settings are `<kid>:<secret>`: a short key id (so keys can rotate: the functions accept
// several, the bridge signs with one) and at least 32 random bytes in base64 or base64url.
import { createHmac, createSecretKey, timingSafeEqual, type KeyObject } from "node:crypto";
import { canonicalJson } from "./canonical-json.ts";
import type { KeyEvent } from "./event.ts";

/** The contract version of a signed event (core/event.ts). */
export const SIGNED_EVENT_VERSION = 3;
/** Secrets shorter than this are refused: HMAC-SHA256 wants a key as long as its output. */
export const MIN_SECRET_BYTES = 32;
const KID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,31}$/;
/** Domain separation: this key signs key events and nothing else. */
const CONTEXT = "crdfn.io/key-event-mac\n";

/** One key: its id and its secret bytes. */
export interface EventKey {
  kid: string;
  secret: Buffer;
}

/**
 * A secret as signing and verifying take it: its bytes, or, where one key signs or verifies many
 * events, a KeyObject made once (signingKey): HMAC with raw bytes imports the key again on every
 * call, about 20 µs of a MAC's 28 (Node 24, a 1.2 kB event); with a KeyObject a MAC takes ~7 µs.
 */
export type EventSecret = Buffer | KeyObject;

/** A key as signing takes it. */
export interface SigningKey {
  kid: string;
  secret: EventSecret;
}

/** The keys a function accepts for one cluster, by kid. */
export type EventKeyring = ReadonlyMap<string, EventSecret>;

export type Verification =
  | { ok: true }
  /** `unsigned`: no MAC (an event from before v3, or not from a bridge); `unknown-key`: a kid not accepted; `mismatch`: the MAC does not verify. */
  | { ok: false; why: "unsigned" | "unknown-key" | "mismatch"; message: string };

/** The MAC of an event, over everything in it but the MAC itself. */
function macOf(event: KeyEvent, secret: EventSecret): Buffer {
  const { mac: _mac, ...signed } = event;
  return createHmac("sha256", secret).update(CONTEXT).update(canonicalJson(signed)).digest();
}

/** A MAC's length in base64url: HMAC-SHA256's 32 bytes. */
const MAC_CHARS = 43;

/** The bytes signing adds to a serialized event (its kid and mac members): what a sender reserves under the size cap. */
export const signatureBytes = (kid: string): number =>
  Buffer.byteLength(JSON.stringify({ kid, mac: "m".repeat(MAC_CHARS) }), "utf8") - "{}".length + ",".length;

/** The event as the bridge sends it: a v3 event carrying its key id and MAC. */
export function signKeyEvent(event: KeyEvent, key: SigningKey): KeyEvent {
  const { mac: _old, ...unsigned } = event;
  const withKid: KeyEvent = { ...unsigned, v: SIGNED_EVENT_VERSION, kid: key.kid };
  return { ...withKid, mac: macOf(withKid, key.secret).toString("base64url") };
}

/**
 * Whether the event carries a MAC made with one of `accepted`. Compared in constant time: how
 * long a wrong MAC takes to refuse says nothing about the right one.
 */
export function verifyKeyEvent(event: KeyEvent, accepted: EventKeyring): Verification {
  if (event.mac === undefined || event.kid === undefined)
    return {
      ok: false,
      why: "unsigned",
      message: `MAC does not verify: the event carries none (a v${event.v} event: from before signed events, or not from a bridge)`,
    };
  const secret = accepted.get(event.kid);
  if (secret === undefined)
    return {
      ok: false,
      why: "unknown-key",
      message: `MAC does not verify: key id "${event.kid}" is not one this function accepts for cluster "${event.cluster}"`,
    };
  const given = Buffer.from(event.mac, "base64url");
  const expected = macOf(event, secret);
  // timingSafeEqual needs equal lengths; the length of a MAC is no secret.
  if (given.length !== expected.length || !timingSafeEqual(given, expected))
    return { ok: false, why: "mismatch", message: `MAC does not verify (key id "${event.kid}")` };
  return { ok: true };
}

/** Parses one `<kid>:<secret>`; throws an Error whose message never quotes the secret. */
export function parseEventKey(text: string): EventKey {
  const colon = text.indexOf(":");
  if (colon < 0) throw new Error("must be <kid>:<secret> (a key id, a colon, the secret in base64)");
  const kid = text.slice(0, colon).trim();
  const encoded = text.slice(colon + 1).trim();
  if (!KID.test(kid)) throw new Error(`key id "${kid.slice(0, 40)}" must be 1-32 letters, digits, . _ -`);
  if (!/^[A-Za-z0-9+/_-]+={0,2}$/.test(encoded)) throw new Error(`the secret of key "${kid}" is not base64`);
  const secret = Buffer.from(encoded.replace(/-/g, "+").replace(/_/g, "/"), "base64");
  if (secret.length < MIN_SECRET_BYTES)
    throw new Error(`the secret of key "${kid}" has ${secret.length} bytes; it needs at least ${MIN_SECRET_BYTES} (e.g. openssl rand -base64 32)`);
  return { kid, secret };
}

/** `key` made ready to sign many events: its secret imported once. */
export function signingKey(key: EventKey): SigningKey {
  return { kid: key.kid, secret: createSecretKey(key.secret) };
}

/** A key as a setting holds it. */
export function formatEventKey(key: EventKey): string {
  return `${key.kid}:${key.secret.toString("base64")}`;
}

/**
 * The functions' keys: comma-separated `[<cluster>/]<kid>:<secret>`, the cluster's part left out
 * where one cluster is served. Returns cluster → kid → secret; `defaultCluster` takes the keys
 * without a cluster. Throws an Error naming the item (never its secret).
 */
export function parseEventKeys(text: string, defaultCluster: string | undefined): Map<string, Map<string, KeyObject>> {
  const out = new Map<string, Map<string, KeyObject>>();
  const items = text
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s !== "");
  if (items.length === 0) throw new Error("names no key");
  items.forEach((item, i) => {
    const colon = item.indexOf(":");
    const slash = item.indexOf("/");
    const hasCluster = slash >= 0 && (colon < 0 || slash < colon);
    const cluster = hasCluster ? item.slice(0, slash) : defaultCluster;
    if (cluster === undefined || cluster === "") throw new Error(`key ${i + 1} names no cluster: write <cluster>/<kid>:<secret> when serving several clusters`);
    let key: EventKey;
    try {
      key = parseEventKey(hasCluster ? item.slice(slash + 1) : item);
    } catch (e) {
      throw new Error(`key ${i + 1} (cluster "${cluster}"): ${(e as Error).message}`);
    }
    const ring = out.get(cluster) ?? new Map<string, KeyObject>();
    if (ring.has(key.kid)) throw new Error(`key id "${key.kid}" is given twice for cluster "${cluster}"`);
    out.set(cluster, ring.set(key.kid, createSecretKey(key.secret)));
  });
  return out;
}
