// The peer benchmark's printed report: every run with its load, then one table of ratios
// crdfn ÷ peer over the medians of the rounds.
import { formatStages, formatTracingCost, type TracingSide } from "../stages.ts";
import type { RunResult } from "./run.ts";
import { SYSTEMS, type SystemName } from "./systems.ts";

interface Metric {
  name: string;
  /** "lower" when a smaller figure is better (ratio < 1 favours crdfn). */
  better: "lower" | "higher";
  of: (r: RunResult) => number;
}

export const METRICS: readonly Metric[] = [
  { name: "setup: all Ready (s)", better: "lower", of: (r) => r.setup.allReadySeconds },
  { name: "rated p50 (ms)", better: "lower", of: (r) => r.rated.latency.p50Ms },
  { name: "rated p99 (ms)", better: "lower", of: (r) => r.rated.latency.p99Ms },
  { name: "closed loop changes/s", better: "higher", of: (r) => r.closedLoop.changesPerSecond },
  { name: "closed loop p50 (ms)", better: "lower", of: (r) => r.closedLoop.latency.p50Ms },
  { name: "closed ÷ raw", better: "higher", of: (r) => r.closedToRaw },
  { name: "cluster-side CPU ms/change", better: "lower", of: (r) => r.closedLoop.clusterSideCpuMsPerChange },
  { name: "  API server+etcd ms/change", better: "lower", of: (r) => r.closedLoop.controlPlaneCpuMsPerChange },
  { name: "  operator/bridge ms/change", better: "lower", of: (r) => r.closedLoop.operatorCpuMsPerChange },
  { name: "off-cluster CPU ms/change", better: "lower", of: (r) => r.closedLoop.offClusterCpuMsPerChange },
  { name: "API requests/change", better: "lower", of: (r) => r.closedLoop.apiRequestsPerChange },
  { name: "cluster-side peak RSS (MiB)", better: "lower", of: (r) => r.clusterSidePeakRssMiB },
];

export function median(xs: readonly number[]): number {
  const s = [...xs].filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (s.length === 0) return Number.NaN;
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? (s[m] ?? Number.NaN) : ((s[m - 1] ?? 0) + (s[m] ?? 0)) / 2;
}

export type Medians = Partial<Record<SystemName, Record<string, number>>>;

/** Over the untraced runs: a traced run is crdfn paying for its tracing, set beside them apart (tracingCost). */
export function medians(runs: readonly RunResult[]): Medians {
  const out: Medians = {};
  for (const system of SYSTEMS) {
    const mine = runs.filter((r) => r.system === system && !r.traced);
    if (mine.length) out[system] = Object.fromEntries(METRICS.map((m) => [m.name, median(mine.map(m.of))]));
  }
  return out;
}

/** crdfn's median ÷ each peer's median, per metric (null where either is missing or the peer's is 0). */
export function ratios(m: Medians): Record<string, Record<string, number | null>> {
  const crdfn = m.crdfn;
  const out: Record<string, Record<string, number | null>> = {};
  for (const peer of SYSTEMS.filter((s) => s !== "crdfn")) {
    const theirs = m[peer];
    if (!theirs || !crdfn) continue;
    out[peer] = Object.fromEntries(
      METRICS.map((x) => {
        const a = crdfn[x.name];
        const b = theirs[x.name];
        return [x.name, a === undefined || b === undefined || !Number.isFinite(a) || !Number.isFinite(b) || b === 0 ? null : Math.round((a / b) * 100) / 100];
      }),
    );
  }
  return out;
}

function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: string[]) => `| ${cells.map((c, i) => (i === 0 ? c.padEnd(widths[i] ?? 0) : c.padStart(widths[i] ?? 0))).join(" | ")} |`;
  return [line(header), `|${widths.map((w) => "-".repeat(w + 2)).join("|")}|`, ...rows.map(line)].join("\n");
}

/** What crdfn's own processes, the bridge and the function process, spent per change in the rated phase, and its p50. */
const tracingSide = (r: RunResult): TracingSide => ({
  cpuMsPerChange: (((r.rated.cpuSeconds.bridge ?? 0) + (r.rated.cpuSeconds.functions ?? 0)) * 1000) / Math.max(1, r.rated.latency.samples),
  p50Ms: r.rated.latency.p50Ms,
  changes: r.rated.latency.samples,
});

/** crdfn untraced and traced, the medians of each over the rounds; null without both. */
export function tracingCost(runs: readonly RunResult[]): { off: TracingSide; on: TracingSide } | null {
  const side = (traced: boolean): TracingSide | null => {
    const mine = runs.filter((r) => r.system === "crdfn" && r.traced === traced).map(tracingSide);
    return mine.length === 0
      ? null
      : { cpuMsPerChange: median(mine.map((m) => m.cpuMsPerChange)), p50Ms: median(mine.map((m) => m.p50Ms)), changes: median(mine.map((m) => m.changes)) };
  };
  const off = side(false);
  const on = side(true);
  return off && on ? { off, on } : null;
}

/** Each traced run's stage breakdown, then tracing's cost: "where a change's time goes" (docs/performance.md). */
function formatTraced(runs: readonly RunResult[]): string[] {
  const traced = runs.filter((r) => r.stages !== null);
  const cost = tracingCost(runs);
  return [
    ...traced.flatMap((r) => [
      "",
      `where a change's time goes, ${r.system} r${r.round} traced, rated phase (load 1m ${fmt(r.loadAvgEnd[0])}):`,
      formatStages(r.stages!, r.rated.latency),
    ]),
    ...(cost ? ["", "tracing's own cost, rated phase (medians over the rounds):", formatTracingCost(cost.off, cost.on)] : []),
  ];
}

const fmt = (x: number | null | undefined): string => (x === null || x === undefined || !Number.isFinite(x) ? "–" : String(Math.round(x * 100) / 100));

export function formatPeersReport(runs: readonly RunResult[]): string {
  const perRun = table(
    ["run", "load 1m start/end", "setup s", "rated p50/p99 ms", "closed/s", "raw/s", "cluster ms/chg", "off ms/chg", "req/chg", "peak RSS MiB"],
    runs.map((r) => [
      `${r.system} r${r.round}${r.traced ? " traced" : ""}`,
      `${fmt(r.loadAvgStart[0])}/${fmt(r.loadAvgEnd[0])}`,
      fmt(r.setup.allReadySeconds),
      `${fmt(r.rated.latency.p50Ms)}/${fmt(r.rated.latency.p99Ms)}`,
      fmt(r.closedLoop.changesPerSecond),
      fmt(r.rawCeiling.patchesPerSecond),
      fmt(r.closedLoop.clusterSideCpuMsPerChange),
      fmt(r.closedLoop.offClusterCpuMsPerChange),
      fmt(r.closedLoop.apiRequestsPerChange),
      fmt(r.clusterSidePeakRssMiB),
    ]),
  );
  const m = medians(runs);
  const systems = SYSTEMS.filter((s) => m[s]);
  const mediansTable = table(
    ["median", ...systems],
    METRICS.map((x) => [x.name, ...systems.map((s) => fmt(m[s]?.[x.name]))]),
  );
  const r = ratios(m);
  const peers = Object.keys(r);
  const ratioTable = table(
    ["crdfn ÷ peer", ...peers, "better"],
    METRICS.map((x) => [x.name, ...peers.map((p) => fmt(r[p]?.[x.name])), x.better === "lower" ? "< 1" : "> 1"]),
  );
  return [perRun, "", mediansTable, "", ratioTable, ...formatTraced(runs)].join("\n");
}
