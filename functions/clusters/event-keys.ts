// The keys a function fleet verifies events with: per cluster (a bridge that holds cluster A's key
// cannot sign for cluster B), several per cluster while a key rotates. From ONE setting,
// CRDFN_EVENT_KEYS: comma-separated `[<cluster>/]<kid>:<secret>`, the cluster's part left out
// where one cluster is served. Every served cluster needs a key: an event no key verifies is
// never handled, so a cluster without one would dead-letter everything.
import { ConfigError } from "../../core/config-error.ts";
import { parseEventKeys, type EventKeyring } from "../../core/event-auth.ts";
import type { ClusterRegistry } from "./registry.ts";

export const EVENT_KEYS_SETTING = "CRDFN_EVENT_KEYS";

/** Cluster id → the keys its events may be signed with. Throws ConfigError in one line, never quoting a secret. */
export function loadEventKeyrings(text: string | undefined, clusters: ClusterRegistry): ReadonlyMap<string, EventKeyring> {
  const fail = (why: string): never => {
    throw new ConfigError(`invalid setting ${EVENT_KEYS_SETTING}: ${why}`);
  };
  if (text === undefined || text.trim() === "")
    return fail("required: the keys this function verifies its events with, as [<cluster>/]<kid>:<secret>, comma-separated (see docs/security.md)");
  const only = clusters.size === 1 ? [...clusters.keys()][0] : undefined;
  let keys = new Map<string, Map<string, Buffer>>();
  try {
    keys = parseEventKeys(text, only);
  } catch (e) {
    fail((e as Error).message);
  }
  for (const cluster of keys.keys()) if (!clusters.has(cluster)) fail(`names cluster "${cluster}", which is not in the registry`);
  for (const cluster of clusters.keys()) if (!keys.has(cluster)) fail(`no key for cluster "${cluster}"`);
  return keys;
}
