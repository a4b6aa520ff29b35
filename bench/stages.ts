// Where a change's time goes (issue 51), from the spans its trace holds: the bridge's hand-off, the
// queue, the function's own overhead and its API writes, each a distribution over a run's
// changes, so crdfn's share of a change's latency is a measured number rather than the rest of an
// aggregate. Pure: the spans come from an OTLP receiver (test/support/otlp-receiver.ts).
import type { ReceivedSpan } from "../test/support/otlp-receiver.ts";
import { percentile, type LatencySummary } from "./stats.ts";

export const STAGES = ["bridge hand-off", "queue", "function overhead", "API writes"] as const;
export type Stage = (typeof STAGES)[number];

export interface Spread {
  samples: number;
  p50Ms: number;
  p99Ms: number;
}

export interface StageBreakdown {
  /** Traces begun by the bridge in the window (its "bridge change" roots). */
  changes: number;
  /** Of those, the ones a function handled. */
  handled: number;
  stages: Record<Stage, Spread>;
  /** From the bridge seeing the change to the end of its last handling. */
  traced: Spread;
  /** The changes no function handled, by the bridge's cause and outcome on their root ("<cause> <outcome>"). */
  unhandled: Record<string, number>;
  /** Span names a stage reads that no trace in the window held: those stages are computed without them (or not at all). */
  missing: string[];
}

const WRITES = new Set(["PATCH", "PUT", "POST"]);
const ms = (ns: bigint): number => Number(ns) / 1e6;
const duration = (s: ReceivedSpan): number => ms(s.endNs - s.startNs);
const isKube = (s: ReceivedSpan): boolean => s.name.startsWith("kube ");
const isWrite = (s: ReceivedSpan): boolean => isKube(s) && WRITES.has(s.name.split(" ")[1] ?? "");
/** Time inside a handling that is not crdfn's: the API server's answers, and the user's own code (effects and finalize may do I/O). */
const USERS = new Set(["reconcile", "effects", "finalize"]);
const notCrdfns = (s: ReceivedSpan): boolean => isKube(s) || USERS.has(s.name);

/** The spans under `root` in its trace (not `root` itself). */
function descendants(root: ReceivedSpan, children: ReadonlyMap<string, readonly ReceivedSpan[]>): ReceivedSpan[] {
  const out: ReceivedSpan[] = [];
  for (let todo = [...(children.get(root.spanId) ?? [])]; todo.length;) {
    const s = todo.pop()!;
    out.push(s);
    todo.push(...(children.get(s.spanId) ?? []));
  }
  return out;
}

/**
 * Milliseconds of `within` that `spans` cover, overlaps counted once: a function may send
 * requests concurrently, and subtracting their sum would charge crdfn negative time.
 */
export function coveredMs(within: ReceivedSpan, spans: readonly ReceivedSpan[]): number {
  const clipped = spans
    .map((s): [bigint, bigint] => [s.startNs > within.startNs ? s.startNs : within.startNs, s.endNs < within.endNs ? s.endNs : within.endNs])
    .filter(([a, b]) => b > a)
    .sort((x, y) => (x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : 0));
  let total = 0n;
  let end = within.startNs;
  for (const [a, b] of clipped) {
    if (b <= end) continue;
    total += b - (a > end ? a : end);
    end = b;
  }
  return ms(total);
}

/**
 * The stages of one change's trace. A change handled more than once (a redelivery, a deferral)
 * pays each handling's overhead and writes; its queue time is the first delivery's.
 */
export function changeStages(trace: readonly ReceivedSpan[]): Partial<Record<Stage, number>> & { tracedMs?: number } {
  const root = trace.find((s) => s.name === "bridge change");
  if (root === undefined) return {};
  const children = new Map<string, ReceivedSpan[]>();
  for (const s of trace) children.set(s.parentSpanId, [...(children.get(s.parentSpanId) ?? []), s]);
  const handles = trace.filter((s) => s.name === "function handle").sort((a, b) => (a.startNs < b.startNs ? -1 : 1));
  const first = handles[0];
  if (first === undefined) return { "bridge hand-off": duration(root) };
  const waited = trace.filter((s) => s.name === "queue wait").sort((a, b) => (a.startNs < b.startNs ? -1 : 1))[0];
  // Without the function's own measure of the wait, from the last send that ended before it ran.
  const sentNs = trace.filter((s) => s.name === "bridge send" && s.endNs <= first.startNs).reduce((m, s) => (s.endNs > m ? s.endNs : m), 0n);
  const under = handles.map((h) => ({ handle: h, spans: descendants(h, children) }));
  return {
    "bridge hand-off": duration(root),
    ...(waited ? { queue: duration(waited) } : sentNs > 0n ? { queue: ms(first.startNs - sentNs) } : {}),
    "function overhead": under.reduce((t, u) => t + duration(u.handle) - coveredMs(u.handle, u.spans.filter(notCrdfns)), 0),
    "API writes": under.reduce((t, u) => t + u.spans.filter(isWrite).reduce((w, s) => w + duration(s), 0), 0),
    tracedMs: ms(handles.reduce((m, h) => (h.endNs > m ? h.endNs : m), 0n) - root.startNs),
  };
}

const spread = (values: readonly number[]): Spread => {
  const sorted = [...values].sort((a, b) => a - b);
  const r1 = (x: number) => Math.round(x * 10) / 10;
  return { samples: sorted.length, p50Ms: r1(percentile(sorted, 50)), p99Ms: r1(percentile(sorted, 99)) };
};

function unhandledOf(traces: ReadonlyArray<readonly ReceivedSpan[]>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const t of traces) {
    if (t.some((s) => s.name === "function handle")) continue;
    const a = t.find((s) => s.name === "bridge change")?.attributes ?? {};
    const key = `${String(a["crdfn.cause"] ?? "?")} ${String(a["crdfn.outcome"] ?? "?")}`;
    out[key] = (out[key] ?? 0) + 1;
  }
  return out;
}

/** Which of the spans the stages read never appeared (say, a side that does not emit them yet). */
function missingNames(spans: readonly ReceivedSpan[]): string[] {
  const wanted: Array<[string, (s: ReceivedSpan) => boolean]> = [
    ["bridge change", (s) => s.name === "bridge change"],
    ["bridge send", (s) => s.name === "bridge send"],
    ["queue wait", (s) => s.name === "queue wait"],
    ["function handle", (s) => s.name === "function handle"],
    ["reconcile", (s) => s.name === "reconcile"],
    ["kube <METHOD> <resource>", isKube],
  ];
  return wanted.filter(([, seen]) => !spans.some(seen)).map(([name]) => name);
}

/**
 * Each stage's spread over the changes whose trace the bridge began within [fromMs, toMs) (epoch
 * milliseconds; all of them without a window): one trace per change, grouped by trace id.
 */
export function stageBreakdown(spans: readonly ReceivedSpan[], window?: { fromMs: number; toMs: number }): StageBreakdown {
  const traces = new Map<string, ReceivedSpan[]>();
  for (const s of spans) traces.set(s.traceId, [...(traces.get(s.traceId) ?? []), s]);
  const inWindow = (root: ReceivedSpan) => window === undefined || (ms(root.startNs) >= window.fromMs && ms(root.startNs) < window.toMs);
  const mine = [...traces.values()].filter((t) => t.some((s) => s.name === "bridge change" && inWindow(s)));
  const per = mine.map(changeStages);
  const values = (key: Stage | "tracedMs") => per.flatMap((p) => (p[key] === undefined ? [] : [p[key]]));
  return {
    changes: per.length,
    handled: values("tracedMs").length,
    stages: Object.fromEntries(STAGES.map((stage) => [stage, spread(values(stage))])) as Record<Stage, Spread>,
    traced: spread(values("tracedMs")),
    unhandled: unhandledOf(mine),
    missing: missingNames(spans),
  };
}

const unhandledLine = (u: Record<string, number>): string =>
  Object.keys(u).length === 0
    ? ""
    : ` (the others by the bridge's cause and outcome: ${Object.entries(u)
        .map(([k, n]) => `${k} ${n}`)
        .join(", ")})`;

const fmt = (x: number): string => (Number.isFinite(x) ? x.toFixed(1) : "–");

/** The breakdown beside the driver's end-to-end latency of the same changes, as a table. */
export function formatStages(b: StageBreakdown, endToEnd: LatencySummary): string {
  const rows: Array<[string, Spread]> = [
    ["end to end (driver: spec write → Ready seen)", { samples: endToEnd.samples, p50Ms: endToEnd.p50Ms, p99Ms: endToEnd.p99Ms }],
    ["traced (bridge saw it → last handling ended)", b.traced],
    ...STAGES.map((s): [string, Spread] => [`  ${s}`, b.stages[s]]),
  ];
  const width = Math.max(...rows.map(([name]) => name.length));
  const lines = [
    `${"stage".padEnd(width)} | samples |  p50 ms |  p99 ms`,
    ...rows.map(([name, s]) => `${name.padEnd(width)} | ${String(s.samples).padStart(7)} | ${fmt(s.p50Ms).padStart(7)} | ${fmt(s.p99Ms).padStart(7)}`),
  ];
  const notes = [
    `${b.changes} changes traced, ${b.handled} handled by a function${unhandledLine(b.unhandled)}`,
    ...(b.missing.length ? [`no span named ${b.missing.map((m) => `"${m}"`).join(", ")} arrived: the stages reading them are computed without them`] : []),
  ];
  return [...lines, ...notes].join("\n");
}

export interface TracingSide {
  /** CPU of the bridge and the function process per change, ms. */
  cpuMsPerChange: number;
  p50Ms: number;
  changes: number;
}

/** Tracing's own price: the same workload untraced and traced. */
export function formatTracingCost(off: TracingSide, on: TracingSide): string {
  const delta = (a: number, b: number) =>
    Number.isFinite(a) && Number.isFinite(b) && a > 0 ? `${b >= a ? "+" : ""}${(((b - a) / a) * 100).toFixed(0)} %` : "–";
  return [
    "tracing     | changes | bridge+functions CPU ms/change | p50 ms",
    `off         | ${String(off.changes).padStart(7)} | ${fmt(off.cpuMsPerChange).padStart(30)} | ${fmt(off.p50Ms).padStart(6)}`,
    `on          | ${String(on.changes).padStart(7)} | ${fmt(on.cpuMsPerChange).padStart(30)} | ${fmt(on.p50Ms).padStart(6)}`,
    `on − off    |         | ${delta(off.cpuMsPerChange, on.cpuMsPerChange).padStart(30)} | ${delta(off.p50Ms, on.p50Ms).padStart(6)}`,
  ].join("\n");
}
