// Objects an operator cannot serve: of its kind, in a namespace it does not serve (created before
// its served-namespaces policy was applied, or the namespaces changed since). The bridge watches
// only the served namespaces (its Roles are there and nowhere else), so it never sees them and
// they would stay without status, Event or line. Finding them takes a list across every
// namespace, which the bridge's identity may not do (it would read every namespace's objects of
// the kind, against least privilege): `crdfn dev`, which runs as the kubeconfig's user, looks at
// start and records a `NamespaceNotServed` Event on each; `crdfn status` shows those Events whose
// object is still there.
import { createHash } from "node:crypto";
import { ApiError, type KubeHttp } from "../clients/kube-http.ts";
import { microTime } from "../clients/micro-time.ts";
import type { Operator } from "../core/operator.ts";
import { resourcePath } from "../core/resource-path.ts";

export const NOT_SERVED_REASON = "NamespaceNotServed";
/** The Events' reporting controller (events.k8s.io requires one). */
const REPORTER = "crdfn.dev/dev";

/** One object of an operator's kind outside the namespaces it serves. */
export interface UnservedObject {
  apiVersion: string;
  kind: string;
  namespace: string;
  name: string;
  uid: string;
}

interface Listed {
  items?: Array<{ metadata?: { name?: string; namespace?: string; uid?: string } }>;
}

/** The operators' namespaced objects outside `served` (a resource not installed has none). */
export async function findUnserved(http: KubeHttp, operators: ReadonlyArray<Operator<unknown>>, served: readonly string[]): Promise<UnservedObject[]> {
  if (served.length === 0) return [];
  const out: UnservedObject[] = [];
  for (const op of operators) {
    const r = op.resource;
    if (r.scope !== "Namespaced") continue;
    let list: Listed;
    try {
      // Names are all this needs: metadata only, never a body.
      list = (await http.getJson(
        resourcePath({ group: r.group, version: r.version, plural: r.plural }),
        {},
        undefined,
        "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json",
      )) as Listed;
    } catch (e) {
      if (e instanceof ApiError && e.code === 404) continue;
      throw e;
    }
    for (const item of list.items ?? []) {
      const m = item.metadata;
      if (!m?.name || !m.namespace || !m.uid || served.includes(m.namespace)) continue;
      out.push({ apiVersion: `${r.group}/${r.version}`, kind: r.kind, namespace: m.namespace, name: m.name, uid: m.uid });
    }
  }
  return out;
}

/** What the Event, dev's line and `crdfn status` say about one such object. */
export function unservedNote(o: Pick<UnservedObject, "kind" | "namespace">, served: readonly string[]): string {
  return `crdfn: ${o.kind} objects are reconciled only in namespace${served.length > 1 ? "s" : ""} ${served.join(", ")}; namespace ${o.namespace} is not served, so this object is never reconciled (move it, or add ${o.namespace} to namespaces: in crdfn.deploy.yaml / crdfn dev --namespace)`;
}

/** dev's line for one such object. */
export const unservedLine = (o: UnservedObject, served: readonly string[]): string =>
  `⚠ ${o.kind} ${o.namespace}/${o.name} not served: ${unservedNote(o, served).replace(/^crdfn: /, "")}`;

/**
 * A Warning Event on the object, named for the object and what it says, so that dev started
 * again finds the one it wrote (409) instead of adding another.
 */
export async function recordUnserved(http: KubeHttp, o: UnservedObject, served: readonly string[], now: Date): Promise<void> {
  const note = unservedNote(o, served);
  const id = createHash("sha256").update(`${o.uid}|${NOT_SERVED_REASON}|${note}`).digest("hex").slice(0, 16);
  const name = `${o.name.slice(0, 200)}.${id}`;
  try {
    await http.json("POST", resourcePath({ group: "events.k8s.io", version: "v1", plural: "events", namespace: o.namespace }), {
      body: {
        apiVersion: "events.k8s.io/v1",
        kind: "Event",
        metadata: { name, namespace: o.namespace },
        eventTime: microTime(now),
        reportingController: REPORTER,
        reportingInstance: "crdfn-dev",
        action: "Serve",
        type: "Warning",
        reason: NOT_SERVED_REASON,
        note,
        regarding: { apiVersion: o.apiVersion, kind: o.kind, name: o.name, namespace: o.namespace, uid: o.uid },
      },
    });
  } catch (e) {
    if (!(e instanceof ApiError && e.code === 409)) throw e;
  }
}

/** Read through core/v1, whose field selectors surely include `reason`: the same Events, `regarding` as `involvedObject`, `note` as `message`. */
interface EventList {
  items?: Array<{ message?: string; involvedObject?: { kind?: string; name?: string; namespace?: string; uid?: string; apiVersion?: string } }>;
}

/**
 * For `crdfn status`: one line per object of these operators' kinds that has a NamespaceNotServed
 * Event and still exists (the same uid: Events outlive their object by up to an hour).
 */
export async function unservedStatusLines(http: KubeHttp, operators: ReadonlyArray<Operator<unknown>>): Promise<string[]> {
  const kinds = new Map(operators.map((op) => [`${op.resource.group}/${op.resource.version}/${op.resource.kind}`, op]));
  const events = (await http.getJson(resourcePath({ group: "", version: "v1", plural: "events" }), {
    fieldSelector: `reason=${NOT_SERVED_REASON}`,
  })) as EventList;
  const lines = new Map<string, string>();
  for (const ev of events.items ?? []) {
    const r = ev.involvedObject;
    const op = r?.apiVersion && r.kind ? kinds.get(`${r.apiVersion}/${r.kind}`) : undefined;
    if (!op || !r?.name || !r.namespace || !r.uid) continue;
    const key = `${r.namespace}/${r.name}`;
    if (lines.has(key)) continue;
    const { group, version, plural } = op.resource;
    const live = (await http.getJson(resourcePath({ group, version, plural, namespace: r.namespace, name: r.name }), {}).catch((e: unknown) => {
      if (e instanceof ApiError && e.code === 404) return undefined;
      throw e;
    })) as { metadata?: { uid?: string } } | undefined;
    if (live?.metadata?.uid !== r.uid) continue;
    lines.set(key, `${op.resource.kind} ${key}: ${(ev.message ?? "").replace(/^crdfn: /, "")}`);
  }
  return [...lines.values()];
}

/** `crdfn status`'s section: a heading and a line per object not served, or "(none)". */
export async function unservedReport(http: KubeHttp, operators: ReadonlyArray<Operator<unknown>>): Promise<string> {
  let lines: string[];
  try {
    lines = await unservedStatusLines(http, operators);
  } catch (e) {
    return `Objects in namespaces not served: could not read their ${NOT_SERVED_REASON} Events: ${(e as Error).message.split("\n")[0]}`;
  }
  return `Objects in namespaces not served (their ${NOT_SERVED_REASON} Events)\n${lines.length > 0 ? lines.map((l) => `  ${l}`).join("\n") : "  (none)"}`;
}
