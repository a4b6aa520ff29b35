// A change's trace as the trace page and `crdfn trace` show it, read from Jaeger's query API
// (/api/traces): the trace the bridge started for the change, with the API server's traces for
// its requests beside it. kube-apiserver continues an incoming traceparent only for users in
// system:masters or system:monitoring (docs/tracing.md); for the functions' and the bridge's own
// identities it starts a trace of its own and links it to the request's span, so those traces
// are found by that link and hung under the span they link to.
import { SetupError } from "../../emulator/errors.ts";

/** The Kubernetes API server's service name (k8s.io/apiserver's tracing options). */
export const APISERVER_SERVICE = "apiserver";
/** The bridge's root span of each change (bridge/publisher.ts). */
export const CHANGE_SPAN = "bridge change";

interface JaegerRef {
  refType: "CHILD_OF" | "FOLLOWS_FROM";
  traceID: string;
  spanID: string;
}
interface JaegerSpan {
  traceID: string;
  spanID: string;
  operationName: string;
  references?: JaegerRef[];
  /** Microseconds since the epoch. */
  startTime: number;
  /** Microseconds. */
  duration: number;
  tags?: Array<{ key: string; value: unknown }>;
  processID: string;
}
interface JaegerTrace {
  traceID: string;
  spans: JaegerSpan[];
  processes: Record<string, { serviceName: string }>;
}

export interface TraceSpan {
  traceId: string;
  spanId: string;
  /** Its parent in the same trace, or the span its trace links to (`linked`). */
  parentId?: string;
  /** Its trace is another one (the API server's), linked to the parent. */
  linked: boolean;
  name: string;
  service: string;
  startUs: number;
  durationUs: number;
  attributes: Record<string, unknown>;
  /** Nesting depth under the change's root. */
  depth: number;
}

export interface Change {
  traceId: string;
  /** The object as the bridge names it: group/plural/namespace/name. */
  object: string;
  cause: string;
  /** What the bridge did with it (crdfn.outcome): sent, or withdrawn, superseded, refused. */
  outcome: string;
  startUs: number;
  durationUs: number;
  /** Depth first, each span after its parent, siblings by start. */
  spans: TraceSpan[];
}

/** What the bridge's crdfn.object says, split. */
export interface ObjectKey {
  group: string;
  plural: string;
  namespace?: string;
  name: string;
}

export function splitObject(key: string): ObjectKey | undefined {
  const parts = key.split("/");
  if (parts.length !== 4) return undefined;
  const [group, plural, namespace, name] = parts as [string, string, string, string];
  return { group, plural, ...(namespace ? { namespace } : {}), name };
}

/** The trace page's search: the text in the object's name (or anywhere in its key). */
export const objectContains =
  (text: string) =>
  (key: string): boolean =>
    key.toLowerCase().includes(text.trim().toLowerCase());

/**
 * `crdfn trace KIND/NAME`: the kind as a person types it (greeting, greetings, Greeting,
 * greetings.example.com) against the plural and group the bridge's key holds.
 */
export function objectIs(kind: string, name: string, namespace?: string): (key: string) => boolean {
  const [k, ...group] = kind.toLowerCase().split(".");
  return (key) => {
    const o = splitObject(key);
    if (!o || o.name !== name || (namespace !== undefined && (o.namespace ?? "") !== namespace)) return false;
    if (group.length > 0 && group.join(".") !== o.group.toLowerCase()) return false;
    const plural = o.plural.toLowerCase();
    return plural === k || plural === `${k}s` || plural === `${k}es` || (k!.endsWith("y") && plural === `${k!.slice(0, -1)}ies`);
  };
}

async function getJson(url: string): Promise<unknown> {
  let res: Response;
  try {
    res = await fetch(url, { signal: AbortSignal.timeout(10_000) });
  } catch (e) {
    throw new SetupError(`the trace viewer's query API at ${new URL(url).origin} does not answer (${(e as Error).message}): is crdfn dev --trace running?`);
  }
  if (!res.ok) throw new SetupError(`the trace viewer's query API answered ${res.status} to ${url}`);
  return res.json();
}

async function traces(query: string, params: Record<string, string | number>): Promise<JaegerTrace[]> {
  const url = new URL("/api/traces", query);
  for (const [k, v] of Object.entries(params)) url.searchParams.set(k, String(v));
  return ((await getJson(url.toString())) as { data?: JaegerTrace[] | null }).data ?? [];
}

const tag = (s: JaegerSpan, key: string): unknown => s.tags?.find((t) => t.key === key)?.value;
const text = (v: unknown): string => (typeof v === "string" ? v : v === undefined || v === null ? "" : JSON.stringify(v));

export interface FindOptions {
  /** Which changes: by the bridge's crdfn.object. */
  match: (object: string) => boolean;
  /** The most recent this many. */
  last: number;
  /** How far back to look. Default an hour. */
  lookbackMs?: number;
  now?: () => number;
}

/** The object's last changes, newest first, each with the API server's spans for its requests. */
export async function findChanges(query: string, o: FindOptions): Promise<Change[]> {
  const endUs = (o.now?.() ?? Date.now()) * 1000;
  const startUs = endUs - (o.lookbackMs ?? 3600_000) * 1000;
  const found = await traces(query, { service: "crdfn-bridge", operation: CHANGE_SPAN, start: startUs, end: endUs, limit: 1000 });
  const changes = found
    .map((t) => ({ t, root: t.spans.find((s) => s.operationName === CHANGE_SPAN) }))
    .filter((c): c is { t: JaegerTrace; root: JaegerSpan } => c.root !== undefined && o.match(text(tag(c.root, "crdfn.object"))))
    .sort((a, b) => b.root.startTime - a.root.startTime)
    .slice(0, o.last);
  return Promise.all(changes.map(({ t }) => withLinked(query, t)));
}

/** One change by its trace id, with the API server's linked traces. */
export async function changeById(query: string, traceId: string): Promise<Change> {
  const url = new URL(`/api/traces/${encodeURIComponent(traceId)}`, query);
  const [t] = ((await getJson(url.toString())) as { data?: JaegerTrace[] }).data ?? [];
  if (!t) throw new SetupError(`no trace ${traceId} in the trace viewer`);
  return withLinked(query, t);
}

async function withLinked(query: string, t: JaegerTrace): Promise<Change> {
  const first = Math.min(...t.spans.map((s) => s.startTime));
  const last = Math.max(...t.spans.map((s) => s.startTime + s.duration));
  // The API server's traces that started while the change ran, and link to one of its spans.
  const around = await traces(query, { service: APISERVER_SERVICE, start: first, end: last + 1000, limit: 2000 });
  const linked = around.filter((a) => a.spans.some((s) => s.references?.some((r) => r.refType === "FOLLOWS_FROM" && r.traceID === t.traceID)));
  return assemble(t, linked);
}

/**
 * A function's steps in the order they run (functions/runtime/steps.ts names them): their clock
 * reads whole milliseconds, so steps that start in the same one tie, and this breaks the tie.
 */
const STEPS = ["queue wait", "function read", "reconcile", "effects", "finalize", "function write", "function settle"];
const stepRank = (name: string): number => (STEPS.includes(name) ? STEPS.indexOf(name) : STEPS.length);

/** The change's spans and the linked traces' as one tree, depth first. */
export function assemble(t: JaegerTrace, linked: readonly JaegerTrace[]): Change {
  const flat: Array<Omit<TraceSpan, "depth">> = [];
  for (const trace of [t, ...linked]) {
    const own = new Set(trace.spans.map((s) => s.spanID));
    for (const s of trace.spans) {
      const parent = s.references?.find((r) => r.refType === "CHILD_OF" && own.has(r.spanID));
      const link = trace === t ? undefined : s.references?.find((r) => r.refType === "FOLLOWS_FROM" && r.traceID === t.traceID);
      const parentId = parent?.spanID ?? link?.spanID;
      flat.push({
        traceId: s.traceID,
        spanId: s.spanID,
        ...(parentId ? { parentId } : {}),
        linked: parent === undefined && link !== undefined,
        name: s.operationName,
        service: trace.processes[s.processID]?.serviceName ?? "?",
        startUs: s.startTime,
        durationUs: s.duration,
        attributes: Object.fromEntries((s.tags ?? []).map((g) => [g.key, g.value])),
      });
    }
  }
  const ids = new Set(flat.map((s) => s.spanId));
  const children = new Map<string | undefined, Array<Omit<TraceSpan, "depth">>>();
  for (const s of flat) {
    // A span whose parent is not here (not exported yet, or another trace's) shows at the top.
    const at = s.parentId !== undefined && ids.has(s.parentId) ? s.parentId : undefined;
    children.set(at, [...(children.get(at) ?? []), s]);
  }
  const spans: TraceSpan[] = [];
  const walk = (at: string | undefined, depth: number): void => {
    for (const s of (children.get(at) ?? []).sort((a, b) => a.startUs - b.startUs || stepRank(a.name) - stepRank(b.name) || a.durationUs - b.durationUs)) {
      spans.push({ ...s, depth });
      walk(s.spanId, depth + 1);
    }
  };
  walk(undefined, 0);
  const root = spans.find((s) => s.name === CHANGE_SPAN) ?? spans[0];
  const startUs = Math.min(...spans.map((s) => s.startUs));
  const endUs = Math.max(...spans.map((s) => s.startUs + s.durationUs));
  return {
    traceId: t.traceID,
    object: text(root?.attributes["crdfn.object"]),
    cause: text(root?.attributes["crdfn.cause"] ?? root?.attributes["crdfn.reason"]),
    outcome: text(root?.attributes["crdfn.outcome"]),
    startUs,
    durationUs: endUs - startUs,
    spans,
  };
}

const ms = (us: number): string => (us / 1000).toFixed(1);

/** A change as terminal lines: a heading, then per span its offset, duration, a bar, service and name. */
export function waterfall(c: Change, width = 40): string[] {
  const scale = width / Math.max(c.durationUs, 1);
  const at = new Date(c.startUs / 1000).toISOString();
  // A change the bridge did not send (its hold withdrawn: nothing to do) says so.
  const why = [c.cause, c.outcome === "sent" ? "" : c.outcome].filter(Boolean).join(", ");
  const lines = [`${at}  ${c.object}  ${why ? `(${why}) ` : ""}${ms(c.durationUs)} ms  trace ${c.traceId}`];
  for (const s of c.spans) {
    const from = Math.min(width - 1, Math.floor((s.startUs - c.startUs) * scale));
    const len = Math.max(1, Math.min(width - from, Math.round(s.durationUs * scale)));
    const bar = `${" ".repeat(from)}${"█".repeat(len)}`.padEnd(width);
    const offset = ms(s.startUs - c.startUs).padStart(8);
    const duration = ms(s.durationUs).padStart(8);
    lines.push(`${offset} ${duration}  |${bar}|  ${"  ".repeat(s.depth)}${s.linked ? "↪ " : ""}${s.service}: ${s.name}`);
  }
  return lines;
}
