// The event key of `crdfn dev`: one per state directory, so messages outlive a restart of dev. It
// is the cluster's key: the bridge holds it and signs each event with its operator's key derived
// from it, and each function gets its operator's key alone (pipeline.ts, docs/security.md).
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { MIN_SECRET_BYTES, parseEventKey, formatEventKey, type EventKey } from "../../core/event-auth.ts";

/** A new random key; its id names when it was made, so a rotation's keys tell apart. */
export function newEventKey(now = new Date()): EventKey {
  return { kid: `k${now.toISOString().slice(0, 10).replace(/-/g, "")}-${randomBytes(3).toString("hex")}`, secret: randomBytes(MIN_SECRET_BYTES) };
}

/** The key of a dev state directory: read, or made and kept there (owner-only) on its first use. */
export function devEventKey(stateDir: string): EventKey {
  const file = join(stateDir, "event-key");
  if (existsSync(file)) return parseEventKey(readFileSync(file, "utf8").trim());
  const key = newEventKey();
  mkdirSync(stateDir, { recursive: true });
  writeFileSync(file, `${formatEventKey(key)}\n`, { mode: 0o600 });
  return key;
}
