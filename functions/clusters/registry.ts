// The clusters a function fleet serves: cluster id (the `cluster` every event carries) → how to
// reach that cluster's API server. From ONE setting: CRDFN_CLUSTERS (JSON) or CRDFN_CLUSTERS_FILE
// (JSON or YAML); without either, the single-cluster settings (CRDFN_KUBE_*) are a registry of
// one entry named CRDFN_CLUSTER. An event naming any other cluster is never served.
import { z } from "zod";
import { parse as parseYaml } from "yaml";
import { ConfigError, zodLine } from "../../core/config-error.ts";
import type { KeyObject } from "node:crypto";
import { parseEventKeys, type EventKeyring, type ListedKey } from "../../core/event-auth.ts";
import { clusterIdSchema } from "../../core/event.ts";
import { awsRegionSchema, eksClusterNameSchema, type FunctionConfig } from "../runtime/config.ts";

const path = z.string().min(1);
const server = z.url({ protocol: /^https?$/ });
/** The CA of a token / eks entry: a PEM file, or base64 PEM (as EKS's DescribeCluster gives it). */
const ca = { caFile: path.optional(), caData: z.base64().optional() };

const entrySchema = z.discriminatedUnion("auth", [
  /** Local use: a kubeconfig file (default: KUBECONFIG / ~/.kube/config) and optionally one of its contexts. */
  z.strictObject({ auth: z.literal("kubeconfig"), kubeconfig: path.optional(), context: z.string().min(1).optional() }),
  /** The ServiceAccount of the pod the functions run in (Cloud Run on GKE, Knative). */
  z.strictObject({ auth: z.literal("in-cluster") }),
  /** A bearer token: inline, or a file re-read as it rotates (a mounted secret, a projected token). */
  z
    .strictObject({ auth: z.literal("token"), server, ...ca, token: z.string().min(1).optional(), tokenFile: path.optional() })
    .refine((e) => (e.token === undefined) !== (e.tokenFile === undefined), { message: "needs exactly one of token, tokenFile", path: ["tokenFile"] }),
  /** An EKS IAM token for the named EKS cluster, signed with the function's own AWS role. */
  z.strictObject({ auth: z.literal("eks"), server, ...ca, eksCluster: eksClusterNameSchema, region: awsRegionSchema.optional() }),
  /** A GKE cluster, with the access token of the function's own Google service account (Cloud Run's metadata server). */
  z.strictObject({ auth: z.literal("gke"), server, ...ca }),
]);

export type ClusterEntry = z.infer<typeof entrySchema>;
/** Cluster id → entry, in the order the setting lists them. */
export type ClusterRegistry = ReadonlyMap<string, ClusterEntry>;

const registrySchema = z.record(clusterIdSchema, entrySchema).refine((r) => Object.keys(r).length > 0, { message: "names no cluster" });

/** Reads the registry setting (and its file, through `readFile`); throws ConfigError in one line. */
export function loadClusterRegistry(config: FunctionConfig, readFile: (path: string) => string): ClusterRegistry {
  if (config.CRDFN_CLUSTERS === undefined && config.CRDFN_CLUSTERS_FILE === undefined) {
    return new Map([[config.CRDFN_CLUSTER, singleClusterEntry(config)]]);
  }
  const setting = config.CRDFN_CLUSTERS !== undefined ? "CRDFN_CLUSTERS" : "CRDFN_CLUSTERS_FILE";
  const fail = (why: string): never => {
    throw new ConfigError(`invalid setting ${setting}: ${why}`);
  };
  let raw: unknown;
  if (config.CRDFN_CLUSTERS !== undefined) {
    try {
      raw = JSON.parse(config.CRDFN_CLUSTERS);
    } catch {
      // Not JSON.parse's message: it quotes the input, and entries may hold tokens.
      fail("not valid JSON");
    }
  } else {
    const file = config.CRDFN_CLUSTERS_FILE ?? "";
    let text = "";
    try {
      text = readFile(file);
    } catch (e) {
      fail(`cannot read ${file}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
    }
    try {
      raw = parseYaml(text);
    } catch {
      fail(`${file} is not valid YAML or JSON`);
    }
  }
  const parsed = registrySchema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const id = issue?.path[0];
    const where = id === undefined ? "" : issue?.code === "invalid_key" ? `cluster id "${String(id)}": ` : `cluster "${String(id)}": `;
    fail(`${where}${zodLine(parsed.error, { first: true, named: 1 })}`);
  }
  const registry = new Map(Object.entries(parsed.data ?? {}));
  for (const [id, entry] of registry) {
    if (entry.auth === "eks" && entry.region === undefined && config.AWS_REGION === undefined) fail(`cluster "${id}": region: required (or AWS_REGION)`);
  }
  return registry;
}

/** The single-cluster settings (CRDFN_KUBE_AUTH and friends) as one registry entry. */
export function singleClusterEntry(c: FunctionConfig): ClusterEntry {
  const caOf = { ...(c.CRDFN_KUBE_CA_FILE ? { caFile: c.CRDFN_KUBE_CA_FILE } : {}), ...(c.CRDFN_KUBE_CA_DATA ? { caData: c.CRDFN_KUBE_CA_DATA } : {}) };
  switch (c.CRDFN_KUBE_AUTH) {
    case "kubeconfig":
      return { auth: "kubeconfig", ...(c.KUBECONFIG ? { kubeconfig: c.KUBECONFIG } : {}) };
    case "in-cluster":
      return { auth: "in-cluster" };
    case "token":
      return {
        auth: "token",
        server: c.CRDFN_KUBE_SERVER ?? "",
        ...caOf,
        ...(c.CRDFN_KUBE_TOKEN !== undefined ? { token: c.CRDFN_KUBE_TOKEN } : { tokenFile: c.CRDFN_KUBE_TOKEN_FILE ?? "" }),
      };
    case "eks":
      return {
        auth: "eks",
        server: c.CRDFN_KUBE_SERVER ?? "",
        ...caOf,
        eksCluster: c.CRDFN_EKS_CLUSTER ?? "",
        ...(c.AWS_REGION ? { region: c.AWS_REGION } : {}),
      };
  }
}

// The keys a function fleet verifies events with: per cluster (a bridge that holds cluster A's key
// cannot sign for cluster B) and per operator (the bridge signs each operator's events with a key
// of its own, derived from the cluster's: core/event-auth.ts), several per operator while a key
// rotates. From ONE setting, CRDFN_EVENT_KEYS: comma-separated
// `[<cluster>/][<plural>.<group>:]<kid>:<secret>`, the cluster's part left out where one cluster is
// served, the operator's where one operator is (an item without it is the key of every operator
// the process serves: a function as deployed holds its own operator's key alone). Every served
// operator of every served cluster needs a key: an event no key verifies is never handled. An
// item for an operator not served here is not loaded.
export const EVENT_KEYS_SETTING = "CRDFN_EVENT_KEYS";

/** Cluster id → operator's resource (`<plural>.<group>`) → the keys its events may be signed with. */
export type EventKeyrings = ReadonlyMap<string, ReadonlyMap<string, EventKeyring>>;

/** The keyrings of the `resources` served, for each cluster of `clusters`. Throws ConfigError in one line, never quoting a secret. */
export function loadEventKeyrings(
  text: string | undefined,
  clusters: ClusterRegistry,
  resources: readonly string[],
  /** What the text came from, for the line that refuses it (the secret's setting when fetched). */
  setting = EVENT_KEYS_SETTING,
): EventKeyrings {
  const fail = (why: string): never => {
    throw new ConfigError(`invalid setting ${setting}: ${why}`);
  };
  if (text === undefined || text.trim() === "")
    return fail(
      "required: the keys this function verifies its events with, as [<cluster>/][<plural>.<group>:]<kid>:<secret>, comma-separated (see docs/security.md)",
    );
  const only = clusters.size === 1 ? [...clusters.keys()][0] : undefined;
  let listed: ListedKey[] = [];
  try {
    listed = parseEventKeys(text, only);
  } catch (e) {
    fail((e as Error).message);
  }
  for (const { cluster } of listed) if (!clusters.has(cluster)) fail(`names cluster "${cluster}", which is not in the registry`);
  const out = new Map<string, Map<string, Map<string, KeyObject>>>();
  for (const cluster of clusters.keys()) {
    const rings = new Map<string, Map<string, KeyObject>>();
    for (const resource of resources) {
      const ring = new Map<string, KeyObject>();
      // An operator's own item first: it is the more specific.
      for (const key of listed.filter((k) => k.cluster === cluster && k.resource === resource)) ring.set(key.kid, key.secret);
      for (const key of listed.filter((k) => k.cluster === cluster && k.resource === undefined))
        if (!ring.has(key.kid)) ring.set(key.kid, key.secret);
        else fail(`key id "${key.kid}" is given both for operator ${resource} and for every operator of cluster "${cluster}"`);
      if (ring.size === 0) fail(`no key for operator ${resource} of cluster "${cluster}"`);
      rings.set(resource, ring);
    }
    out.set(cluster, rings);
  }
  return out;
}
