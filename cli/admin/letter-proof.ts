// Whether a dead letter is what a bridge sent: its MAC verifies with its operator's key and it
// names the cluster this command reaches. A dead letter is a queue message like any other, and
// whoever may send to the dead-letter queue is not thereby the bridge: a forged letter names any
// object it likes, and `crdfn replay --apply` would reconcile that object under the person's own
// kubeconfig. The keys, first found: --event-keys <file> (CRDFN_EVENT_KEYS' syntax, an operator's
// keys), CRDFN_EVENT_KEYS (a function's), CRDFN_EVENT_KEY (a cluster key, the bridge's: the
// operator's key is derived), the cluster key `crdfn dev` keeps in its state directory. The
// cluster: --cluster, else CRDFN_CLUSTER, else "default" (what a function of this environment
// would serve).
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { ConfigError } from "../../core/config-error.ts";
import { operatorKey, parseEventKey, verifyKeyEvent, type EventKey, type EventKeyring } from "../../core/event-auth.ts";
import { loadEventKeyrings } from "../../functions/clusters/registry.ts";
import { SetupError } from "../../emulator/errors.ts";

export type LetterProof = { ok: true; how: string } | { ok: false; why: string };

export interface ProofOptions {
  /** The cluster the letter must name; default CRDFN_CLUSTER, else "default". */
  cluster?: string;
  /** A file holding the operator's keys as CRDFN_EVENT_KEYS spells them. */
  eventKeysFile?: string;
  env: NodeJS.ProcessEnv;
  stateDir: string;
}

/** The keys the letter's operator's events verify with here, and where they came from; undefined when none is to be had. */
function keyringOf(o: ProofOptions, cluster: string, resource: string): { ring: EventKeyring; from: string } | undefined {
  const operatorRing = (text: string, from: string) => {
    try {
      const rings = loadEventKeyrings(text, new Map([[cluster, { auth: "in-cluster" as const }]]), [resource]);
      return { ring: rings.get(cluster)!.get(resource)!, from };
    } catch (e) {
      throw new SetupError(`${from}: ${(e as Error).message.replace(/^invalid setting CRDFN_EVENT_KEYS: /, "")}`);
    }
  };
  const derived = (text: string, from: string) => {
    let key: EventKey;
    try {
      key = parseEventKey(text.trim());
    } catch (e) {
      throw new SetupError(`${from}: ${(e as Error).message}`);
    }
    const own = operatorKey(key, resource);
    return { ring: new Map([[own.kid, own.secret]]), from };
  };
  if (o.eventKeysFile !== undefined) {
    if (!existsSync(o.eventKeysFile)) throw new SetupError(`--event-keys ${o.eventKeysFile}: no such file`);
    return operatorRing(
      readFileSync(o.eventKeysFile, "utf8")
        .trim()
        .replace(/\s*\n\s*/g, ","),
      `--event-keys ${o.eventKeysFile}`,
    );
  }
  if (o.env.CRDFN_EVENT_KEYS) return operatorRing(o.env.CRDFN_EVENT_KEYS, "CRDFN_EVENT_KEYS");
  if (o.env.CRDFN_EVENT_KEY) return derived(o.env.CRDFN_EVENT_KEY, "CRDFN_EVENT_KEY");
  const dev = join(o.stateDir, "event-key");
  if (existsSync(dev)) return derived(readFileSync(dev, "utf8"), dev);
  return undefined;
}

/** Proves a dead letter's body (as it sits in the queue, before any schema reads it) for `resource` (`<plural>.<group>`). */
export function proveLetter(body: string, resource: string, o: ProofOptions): LetterProof {
  let raw: unknown;
  try {
    raw = JSON.parse(body);
  } catch {
    return { ok: false, why: "not JSON" };
  }
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) return { ok: false, why: "not a JSON object" };
  const letter = raw as Record<string, unknown>;
  const expected = o.cluster ?? o.env.CRDFN_CLUSTER ?? "default";
  const named = typeof letter.cluster === "string" ? letter.cluster.slice(0, 63) : "";
  if (named !== expected)
    return { ok: false, why: `it names cluster "${named}", not "${expected}", the one this command serves (--cluster, else CRDFN_CLUSTER, else "default")` };
  let keys: ReturnType<typeof keyringOf>;
  try {
    keys = keyringOf(o, expected, resource);
  } catch (e) {
    if (e instanceof ConfigError) throw new SetupError(e.message);
    throw e;
  }
  if (keys === undefined)
    return { ok: false, why: "no event key to check its MAC with (give --event-keys <file>, or set CRDFN_EVENT_KEYS or CRDFN_EVENT_KEY)" };
  const proof = verifyKeyEvent(letter, keys.ring);
  return proof.ok
    ? { ok: true, how: `its MAC verifies (key id "${String(letter.kid)}", from ${keys.from}), cluster "${expected}"` }
    : { ok: false, why: proof.message };
}
