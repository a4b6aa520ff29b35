// bench:platform's verdict: the platform team's bars checked on the two systems' runs, and the table a
// person reads (markdown, so docs/performance.md takes it as printed), with the load averages.
import { formatStages, formatTracingCost, type TracingSide } from "../stages.ts";
import type { PlatformRun } from "./run.ts";

export interface Bar {
  name: string;
  goal: string;
  crdfn: string;
  controllerRuntime: string;
  ratio: string;
  pass: boolean;
}

const ratioOf = (a: number, b: number): number | null => (b > 0 ? a / b : null);
const x = (r: number | null): string => (r === null ? "–" : `${r.toFixed(2)}×`);
const f = (n: number | null | undefined, digits = 1): string => (n === null || n === undefined || !Number.isFinite(n) ? "–" : n.toFixed(digits));

/** Slack for "equal" API requests per change: the counts' own noise (watch reconnects, the driver's few reads) is about this. */
export const EQUAL_REQUESTS_SLACK = 0.1;

/**
 * The bars: cluster-side RSS ≤ 0.3× (peak, what a memory limit must allow), idle CPU ≤ 0.5×,
 * API requests per change no more than controller-runtime's, p50 ≤ 1.5×, fewer watches; and on the
 * SQS path ≤ 1.0 queue request per change with the rate sustained (every change written and seen).
 */
export function checkBars(crdfn: PlatformRun, cr: PlatformRun): Bar[] {
  const rss = ratioOf(crdfn.rss.clusterSidePeakMiB, cr.rss.clusterSidePeakMiB);
  const idle = ratioOf(crdfn.idle.clusterSideCpuPercent, cr.idle.clusterSideCpuPercent);
  const p50 = ratioOf(crdfn.rated.latency.p50Ms, cr.rated.latency.p50Ms);
  const queue = crdfn.rated.queueRequestsPerChange;
  const sustained = (r: PlatformRun) => r.rated.writeErrors === 0 && r.rated.unobserved === 0;
  return [
    {
      name: "cluster-side RSS, peak (MiB)",
      goal: "≤ 0.3×",
      crdfn: f(crdfn.rss.clusterSidePeakMiB),
      controllerRuntime: f(cr.rss.clusterSidePeakMiB),
      ratio: x(rss),
      pass: rss !== null && rss <= 0.3,
    },
    {
      name: "idle CPU, cluster side (% of a core)",
      goal: "≤ 0.5×",
      crdfn: f(crdfn.idle.clusterSideCpuPercent, 2),
      controllerRuntime: f(cr.idle.clusterSideCpuPercent, 2),
      ratio: x(idle),
      // Both at 0.00 % (nothing measurable in the window) is no worse.
      pass: idle === null ? crdfn.idle.clusterSideCpuPercent === 0 : idle <= 0.5,
    },
    {
      name: "API requests per change",
      goal: `≤ controller-runtime's (+${EQUAL_REQUESTS_SLACK})`,
      crdfn: f(crdfn.rated.apiRequestsPerChange, 2),
      controllerRuntime: f(cr.rated.apiRequestsPerChange, 2),
      ratio: x(ratioOf(crdfn.rated.apiRequestsPerChange, cr.rated.apiRequestsPerChange)),
      pass: crdfn.rated.apiRequestsPerChange <= cr.rated.apiRequestsPerChange + EQUAL_REQUESTS_SLACK,
    },
    {
      name: "p50 change → child and status Ready (ms)",
      goal: "≤ 1.5×",
      crdfn: f(crdfn.rated.latency.p50Ms),
      controllerRuntime: f(cr.rated.latency.p50Ms),
      ratio: x(p50),
      pass: p50 !== null && p50 <= 1.5,
    },
    {
      name: "watches held open on the API server",
      goal: "fewer",
      crdfn: String(crdfn.watches.median),
      controllerRuntime: String(cr.watches.median),
      ratio: x(ratioOf(crdfn.watches.median, cr.watches.median)),
      pass: crdfn.watches.median < cr.watches.median,
    },
    {
      name: `SQS requests per change at ${crdfn.rated.ratePerSecond}/s, sustained`,
      goal: "≤ 1.0, none lost",
      crdfn: `${f(queue, 2)} (${crdfn.rated.unobserved} unobserved, ${crdfn.rated.writeErrors} write errors)`,
      controllerRuntime: "–",
      ratio: "–",
      pass: queue !== null && queue <= 1.0 && sustained(crdfn),
    },
  ];
}

function table(header: readonly string[], rows: ReadonlyArray<readonly string[]>): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: readonly string[]) => `| ${cells.map((c, i) => c.padEnd(widths[i] ?? 0)).join(" | ")} |`;
  return [line(header), `|${widths.map((w) => "-".repeat(w + 2)).join("|")}|`, ...rows.map(line)].join("\n");
}

const load = (l: readonly number[]): string => l.map((v) => v.toFixed(2)).join(" ");
const queueLine = (q: Record<string, number> | null, writes: number): string =>
  q === null
    ? "–"
    : Object.entries(q)
        .map(([k, n]) => `${k.replace(/Command$/, "")} ${(n / Math.max(1, writes)).toFixed(2)}`)
        .join(", ");

/** The bars, then every measure side by side, then each run's load averages. */
export function formatPlatformReport(crdfn: PlatformRun, cr: PlatformRun, bars: readonly Bar[] = checkBars(crdfn, cr)): string {
  const both = (label: string, of: (r: PlatformRun) => string): string[] => [label, of(crdfn), of(cr)];
  const lat = (r: PlatformRun) => `p50 ${f(r.rated.latency.p50Ms)} / p99 ${f(r.rated.latency.p99Ms)} ms (n=${r.rated.latency.samples})`;
  return [
    table(
      ["bar", "goal", "crdfn", "controller-runtime ×" + String(cr.setup.kinds), "crdfn ÷ c-r", ""],
      bars.map((b) => [b.name, b.goal, b.crdfn, b.controllerRuntime, b.ratio, b.pass ? "PASS" : "MISS"]),
    ),
    "",
    table(
      ["measure", "crdfn (one bridge)", `controller-runtime (${cr.setup.kinds} processes)`],
      [
        both(
          "objects (kinds × per kind), all Ready after",
          (r) => `${r.setup.objects} (${r.setup.kinds} × ${r.setup.objects / r.setup.kinds}), ${f(r.setup.allReadySeconds)} s`,
        ),
        both("cluster-side RSS: peak / end of idle (MiB)", (r) => `${f(r.rss.clusterSidePeakMiB)} / ${f(r.rss.clusterSideIdleMiB)}`),
        both("off-cluster RSS peak (MiB)", (r) => f(r.rss.offClusterPeakMiB)),
        both(
          "idle: cluster side / off-cluster / API server+etcd (% of a core)",
          (r) =>
            `${f(r.idle.clusterSideCpuPercent, 2)} / ${f(r.idle.offClusterCpuPercent, 2)} / ${f(r.idle.controlPlaneCpuPercent, 2)} over ${f(r.idle.seconds, 0)} s`,
        ),
        both("idle: API requests (all clients)", (r) => String(r.idle.apiRequests)),
        both("watches held: median (min–max) over the idle window", (r) => `${r.watches.median} (${r.watches.min}–${r.watches.max})`),
        both(
          "watches by resource",
          (r) =>
            Object.entries(r.watches.byResource)
              .map(([k, v]) => `${k} ${v}`)
              .join(", ") || "–",
        ),
        both("rated: offered / seen reconciled (changes/s)", (r) => `${r.rated.ratePerSecond} / ${f(r.rated.observedPerSecond)}`),
        both("rated: change → child and status Ready", lat),
        both("rated: writes / errors / unobserved", (r) => `${r.rated.writes} / ${r.rated.writeErrors} / ${r.rated.unobserved}`),
        both(
          "rated: CPU ms per change, cluster side / API server+etcd / off-cluster",
          (r) => `${f(r.rated.clusterSideCpuMsPerChange, 2)} / ${f(r.rated.controlPlaneCpuMsPerChange, 2)} / ${f(r.rated.offClusterCpuMsPerChange, 2)}`,
        ),
        both(
          "rated: CPU ms per change by process",
          (r) =>
            Object.entries(r.rated.cpuMsPerChangeByProcess)
              .map(([k, v]) => `${k} ${f(v, 2)}`)
              .join(", ") || "–",
        ),
        both("rated: API requests per change", (r) => f(r.rated.apiRequestsPerChange, 2)),
        both(
          "rated: the API server's mean ms per request",
          (r) =>
            Object.entries(r.rated.serverMsPerRequest)
              .map(([k, v]) => `${k} ${f(v)}`)
              .join(", ") || "–",
        ),
        both("rated: reconciles run / ms inside the function / bridge publish delay (mean)", (r) =>
          r.rated.pipeline === null
            ? "–"
            : `${r.rated.pipeline.reconciles} / ${f(r.rated.pipeline.functionMsPerReconcile)} ms / ${f(r.rated.pipeline.bridgePublishDelayMs)} ms`,
        ),
        both("rated: SQS requests per change", (r) =>
          r.rated.queueRequestsPerChange === null ? "–" : `${f(r.rated.queueRequestsPerChange, 2)} (${queueLine(r.rated.queueRequests, r.rated.writes)})`,
        ),
        both("load average: start / rated / end", (r) => `${load(r.loadAvgStart)} / ${load(r.rated.loadAvg)} / ${load(r.loadAvgEnd)}`),
      ],
    ),
  ].join("\n");
}

/** crdfn's own processes, the bridge and the function process, per change written in the rated phase, and its p50. */
const tracingSide = (r: PlatformRun): TracingSide => ({
  cpuMsPerChange: (r.rated.cpuMsPerChangeByProcess.bridge ?? 0) + (r.rated.cpuMsPerChangeByProcess.functions ?? 0),
  p50Ms: r.rated.latency.p50Ms,
  changes: r.rated.latency.samples,
});

/** crdfn traced beside untraced, same workload: where a change's time goes, and tracing's own cost. */
export function formatTracedPlatform(off: PlatformRun, on: PlatformRun): string {
  return [
    `where a change's time goes, crdfn traced, rated phase (load ${load(on.rated.loadAvg)}):`,
    on.stages ? formatStages(on.stages, on.rated.latency) : "no spans collected",
    "",
    `tracing's own cost, rated phase (load untraced ${load(off.rated.loadAvg)}, traced ${load(on.rated.loadAvg)}):`,
    formatTracingCost(tracingSide(off), tracingSide(on)),
  ].join("\n");
}
