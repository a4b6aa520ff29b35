// Proof that a key event came from its cluster's bridge, unchanged: an HMAC-SHA256 over the whole
// event (naming part, body, children's keys), with a key only that bridge and the functions hold.
// Whoever may merely send to the queue cannot make a function write what it made up. The proof
// travels inside the event body, so every transport, every deferral re-send and a dead-letter
// redrive carry it unchanged.
//
// Keys as settings are `<kid>:<secret>`: a short key id (so keys can rotate: the functions accept
// several, the bridge signs with one) and at least 32 random bytes in base64 or base64url.
//
// One key per operator: the bridge holds its cluster's key and signs each event with the key of
// the event's operator, derived from it (HKDF-SHA256, the operator's resource `<plural>.<group>`
// as its info); each operator's function holds its operator's key alone. Whoever reads one
// function's environment can sign for that operator, not for the others of the cluster. The
// derived key keeps the cluster key's kid, so a rotation is one kid for the bridge and all of its
// functions, several valid at once as before.
import { createHmac, createSecretKey, hkdfSync, timingSafeEqual, type KeyObject } from "node:crypto";
import { canonicalJson } from "./canonical-json.ts";
import type { KeyEvent } from "./event.ts";

/** The contract version of a signed event (core/event.ts). */
export const SIGNED_EVENT_VERSION = 3;
/** Secrets shorter than this are refused: HMAC-SHA256 wants a key as long as its output. */
export const MIN_SECRET_BYTES = 32;
const KID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,31}$/;
/** Domain separation: this key signs key events and nothing else. */
const CONTEXT = "crdfn.io/key-event-mac\n";
/** Domain separation of a deferred message's attributes (deferralSeal): never a key event's MAC. */
const DEFERRAL_CONTEXT = "crdfn.io/deferral-mac\n";
/** HKDF's salt: a fixed string, so one cluster key derives the same operator keys everywhere. */
const OPERATOR_KEY_SALT = "crdfn.io/operator-event-key/v1";
/** An operator's resource as key derivation and the keys setting name it: `<plural>.<group>` (DNS-subdomain characters). */
const RESOURCE = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

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

/** An operator's resource as its key is derived for: `<plural>.<group>` (the plural alone in the core group). */
export const operatorResource = (r: { group: string; plural: string }): string => (r.group === "" ? r.plural : `${r.plural}.${r.group}`);

/**
 * The key of one operator's events, derived from its cluster's key: what the bridge signs that
 * operator's events with and what that operator's function holds. Same kid as the cluster key.
 */
export function operatorKey(clusterKey: EventKey, resource: string): EventKey {
  if (!RESOURCE.test(resource)) throw new Error(`"${resource.slice(0, 80)}" is not an operator's resource (<plural>.<group>)`);
  return { kid: clusterKey.kid, secret: Buffer.from(hkdfSync("sha256", clusterKey.secret, OPERATOR_KEY_SALT, resource, 32)) };
}

/** The MAC of an event (as parsed JSON), over everything in it but the MAC itself. */
function macOf(event: Readonly<Record<string, unknown>>, secret: EventSecret): Buffer {
  const { mac: _mac, ...signed } = event;
  return createHmac("sha256", secret).update(CONTEXT).update(canonicalJson(signed)).digest();
}

/** Whether `given` (base64url) is `expected`, in constant time: how long a wrong MAC takes to refuse says nothing about the right one. */
function sameMac(text: string, expected: Buffer): boolean {
  const given = Buffer.from(text, "base64url");
  // timingSafeEqual needs equal lengths; the length of a MAC is no secret.
  return given.length === expected.length && timingSafeEqual(given, expected);
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
 * Whether the event carries a MAC made with one of `accepted`. Takes the event as JSON.parse gave
 * it, before any schema has looked at it (functions/runtime/delivery.ts): what is not proven to
 * come from the bridge is not read further.
 */
export function verifyKeyEvent(event: Readonly<Record<string, unknown>> | KeyEvent, accepted: EventKeyring): Verification {
  const { mac: claimed, kid, cluster, v } = event as Record<string, unknown>;
  if (typeof claimed !== "string" || typeof kid !== "string")
    return {
      ok: false,
      why: "unsigned",
      message: `MAC does not verify: the event carries none (a v${typeof v === "number" ? v : "?"} event: from before signed events, or not from a bridge)`,
    };
  const secret = accepted.get(kid);
  if (secret === undefined)
    return {
      ok: false,
      why: "unknown-key",
      message: `MAC does not verify: key id "${kid.slice(0, 40)}" is not one this function accepts for cluster "${String(cluster).slice(0, 63)}"`,
    };
  if (!sameMac(claimed, macOf(event, secret))) return { ok: false, why: "mismatch", message: `MAC does not verify (key id "${kid}")` };
  return { ok: true };
}

/** What a deferral's MAC covers: the event's own MAC (so it binds to that one event) and the attributes' values as carried. */
function deferralMacOf(eventMac: string, since: string, deferrals: string, secret: EventSecret): Buffer {
  return createHmac("sha256", secret).update(DEFERRAL_CONTEXT).update(`${eventMac}\n${since}\n${deferrals}`).digest();
}

/**
 * The MAC a function adds to the deferral attributes of a message it re-sends (when deferral
 * began, how many times), made with the operator key that verified the event: the attributes
 * steer (a first delivery, the deferral limit), and the queue's senders are not the function.
 */
export function deferralSeal(eventMac: string, since: string, deferrals: string, secret: EventSecret): string {
  return deferralMacOf(eventMac, since, deferrals, secret).toString("base64url");
}

/** Whether `seal` is the deferral MAC of these values under `secret` (constant time). */
export function verifyDeferralSeal(eventMac: string, since: string, deferrals: string, seal: string, secret: EventSecret): boolean {
  return sameMac(seal, deferralMacOf(eventMac, since, deferrals, secret));
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

/** One item of the functions' keys setting: for a cluster, for one operator or (resource undefined) for every operator the process serves. */
export interface ListedKey {
  cluster: string;
  resource: string | undefined;
  kid: string;
  secret: KeyObject;
}

/**
 * The functions' keys: comma-separated `[<cluster>/][<plural>.<group>:]<kid>:<secret>`, the
 * cluster's part left out where one cluster is served, the operator's where the process serves
 * one operator (a function as deployed: its key is its operator's). `defaultCluster` takes the
 * keys without a cluster. Throws an Error naming the item (never its secret).
 */
export function parseEventKeys(text: string, defaultCluster: string | undefined): ListedKey[] {
  const items = text
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s !== "");
  if (items.length === 0) throw new Error("names no key");
  const seen = new Set<string>();
  return items.map((item, i) => {
    const colon = item.indexOf(":");
    const slash = item.indexOf("/");
    const hasCluster = slash >= 0 && (colon < 0 || slash < colon);
    const cluster = hasCluster ? item.slice(0, slash) : defaultCluster;
    if (cluster === undefined || cluster === "") throw new Error(`key ${i + 1} names no cluster: write <cluster>/<kid>:<secret> when serving several clusters`);
    let rest = hasCluster ? item.slice(slash + 1) : item;
    // base64 has no colon: a third part before the kid is the operator's resource.
    const parts = rest.split(":");
    let resource: string | undefined;
    if (parts.length === 3) {
      resource = parts[0]!.trim();
      if (!RESOURCE.test(resource))
        throw new Error(`key ${i + 1} (cluster "${cluster}"): "${resource.slice(0, 80)}" is not an operator's resource (<plural>.<group>)`);
      rest = rest.slice(rest.indexOf(":") + 1);
    } else if (parts.length > 3) throw new Error(`key ${i + 1} (cluster "${cluster}"): must be [<plural>.<group>:]<kid>:<secret>`);
    let key: EventKey;
    try {
      key = parseEventKey(rest);
    } catch (e) {
      throw new Error(`key ${i + 1} (cluster "${cluster}"${resource ? `, operator ${resource}` : ""}): ${(e as Error).message}`);
    }
    const id = `${cluster}/${resource ?? "*"}/${key.kid}`;
    if (seen.has(id)) throw new Error(`key id "${key.kid}" is given twice for ${resource ? `operator ${resource} of ` : ""}cluster "${cluster}"`);
    seen.add(id);
    return { cluster, resource, kid: key.kid, secret: createSecretKey(key.secret) };
  });
}
