// The benchmark's verdict: targets checked, and a table a person can read.
import {
  AWS_LIST_PRICES,
  breakEvenChangesPerSecond,
  costOfMillionChanges,
  podMonthlyCost,
  type Architecture,
  type ChangeUsage,
  type MillionChanges,
  type PodSize,
} from "./cost.ts";
import type { BenchResult, LoadPhases } from "./pipeline.ts";
import type { PushSummary } from "./pushes.ts";

export interface Target {
  name: string;
  goal: string;
  value: string;
  pass: boolean;
}

const MiB = 1024 * 1024;

/** The targets for this 2-core machine (set at 50 changes/s over 1000 objects); full load's where it ran. */
export function checkTargets(r: BenchResult): Target[] {
  return [
    { name: "latency p50", goal: "≤ 50 ms", value: `${r.rated.latency.p50Ms} ms`, pass: r.rated.latency.p50Ms <= 50 },
    { name: "latency p99", goal: "≤ 250 ms", value: `${r.rated.latency.p99Ms} ms`, pass: r.rated.latency.p99Ms <= 250 },
    ...(r.ratioToRaw === undefined ? [] : [{ name: "full load vs raw ceiling", goal: "≥ 0.3×", value: `${r.ratioToRaw}×`, pass: r.ratioToRaw >= 0.3 }]),
    { name: "bridge RSS (max)", goal: "≤ 128 MiB", value: `${(r.bridge.maxRssBytes / MiB).toFixed(1)} MiB`, pass: r.bridge.maxRssBytes <= 128 * MiB },
  ];
}

/** The function as deployed (serverless.yml's provider), which its GB-seconds follow. */
export interface DeployedFunction {
  memoryMiB: number;
  architecture: Architecture;
}

/** The always-on controller a change's spend is set against: 0.25 vCPU with Fargate's least memory for it. */
export const CONTROLLER_POD: PodSize = { vcpu: 0.25, memoryGiB: 0.5, architecture: "x86_64" };

/** A change's spend set against the always-on pod: what the pod costs a month, and the rate at which the changes cost as much. */
export interface AgainstThePod {
  pod: PodSize;
  podMonthly: number;
  /** Changes per second, steady, at which the changes cost what the pod does. */
  breakEvenChangesPerSecond: number;
}

/** `perMillionChanges` dollars per million changes, on either provider, set against CONTROLLER_POD. */
export function againstThePod(perMillionChanges: number): AgainstThePod {
  const podMonthly = podMonthlyCost(CONTROLLER_POD);
  return { pod: CONTROLLER_POD, podMonthly, breakEvenChangesPerSecond: breakEvenChangesPerSecond(podMonthly, perMillionChanges) };
}

/** The pod's line under a cost report; `aside` says more of the pod. */
export function formatPodLine(c: AgainstThePod, aside = ""): string {
  return (
    `  one always-on controller pod (${c.pod.vcpu} vCPU / ${c.pod.memoryGiB} GiB, Fargate ${c.pod.architecture}${aside}): $${c.podMonthly.toFixed(2)} a month = ` +
    `${c.breakEvenChangesPerSecond.toFixed(2)} changes/s of the above, steady, all month`
  );
}

export interface ChangeCost extends AgainstThePod {
  /** Measured in the rated phase (a steady change rate), per spec change written. */
  usage: ChangeUsage;
  /** Dollars per million changes. */
  perMillionChanges: MillionChanges;
  prices: { asOf: string; source: string };
}

/**
 * The rated phase's cost per change at AWS list prices. Every reconcile is priced as its own
 * invocation (batches of one): the upper bound, since Lambda's event source may hand a batch of
 * several objects' messages to one invocation, and the local poller cannot say how it would.
 */
export function changeCost(r: BenchResult, deployed: DeployedFunction): ChangeCost {
  const changes = Math.max(1, r.rated.writes);
  const requests = Object.values(r.rated.cpu.queueRequests).reduce((a, b) => a + b, 0);
  const reconcilesPerChange = r.rated.reconciles / changes;
  const usage: ChangeUsage = {
    queueRequestsPerChange: requests / changes,
    invocationsPerChange: reconcilesPerChange,
    functionMsPerChange: r.rated.handlerLatency.meanMs * reconcilesPerChange,
    ...deployed,
  };
  const perMillionChanges = costOfMillionChanges(usage);
  return { usage, perMillionChanges, ...againstThePod(perMillionChanges.total), prices: { asOf: AWS_LIST_PRICES.asOf, source: AWS_LIST_PRICES.source } };
}

/** The cost lines under the report's table. */
export function formatCost(c: ChangeCost): string {
  const u = c.usage;
  const m = c.perMillionChanges;
  const $ = (x: number) => `$${x.toFixed(2)}`;
  return [
    `What a change costs on AWS (rated phase; list prices of ${c.prices.asOf}, us-east-1, free tiers left out; prices change):`,
    `  per change: ${u.queueRequestsPerChange.toFixed(2)} SQS FIFO requests, ${u.invocationsPerChange.toFixed(2)} invocations (batches of one, the upper bound), ` +
      `${u.functionMsPerChange.toFixed(1)} ms in the function at ${u.memoryMiB} MiB ${u.architecture} = ${m.gbSecondsPerChange.toFixed(6)} GB-s`,
    `  per million changes: SQS ${$(m.sqs)} + Lambda requests ${$(m.lambdaRequests)} + Lambda duration ${$(m.lambdaDuration)} = ${$(m.total)}`,
    formatPodLine(c),
  ].join("\n");
}

function table(rows: ReadonlyArray<readonly string[]>): string {
  const widths = rows.reduce<number[]>((w, row) => row.map((c, i) => Math.max(w[i] ?? 0, c.length)), []);
  return rows
    .map((row) =>
      row
        .map((c, i) => c.padEnd(widths[i] ?? 0))
        .join("  ")
        .trimEnd(),
    )
    .join("\n");
}

const calls = (s: { mean: number; histogram: Record<string, number> }): string =>
  `${s.mean} (${Object.entries(s.histogram)
    .map(([k, n]) => `${k}:${n}`)
    .join(" ")})`;
/** Each kind of request to the queue, per change, and their sum: what SQS bills and what ElasticMQ's CPU follows. */
const queue = (c: { queueRequests: Record<string, number> }, changes: number): string => {
  const per = (n: number) => (n / Math.max(1, changes)).toFixed(2);
  const parts = Object.entries(c.queueRequests)
    .filter(([, n]) => n > 0)
    .map(([k, n]) => `${k.replace(/Command$/, "")} ${per(n)}`);
  return `${per(Object.values(c.queueRequests).reduce((a, b) => a + b, 0))} (${parts.join(", ")})`;
};

const cpuNames: Record<string, string> = {
  apiServer: "API server",
  etcd: "etcd",
  elasticMq: "ElasticMQ",
  pubSubEmulator: "Pub/Sub emulator",
  bridge: "bridge",
  bench: "consumer+functions+load",
};
const cpu = (c: { percentOfOneCore: Record<string, number>; machineBusyPercent: number }): string =>
  `${Object.entries(c.percentOfOneCore)
    .map(([k, v]) => `${cpuNames[k] ?? k} ${v}%`)
    .join(", ")}; machine ${c.machineBusyPercent}% busy (of all cores)`;

const lat = (l: BenchResult["rated"]["latency"]) => `p50 ${l.p50Ms} / p95 ${l.p95Ms} / p99 ${l.p99Ms} / max ${l.maxMs} ms (n=${l.samples})`;

/** Whether the phases under load ran (the Lambda target's). */
const hasLoadPhases = (r: BenchResult): r is BenchResult & LoadPhases =>
  r.closedLoop !== undefined && r.rawCeiling !== undefined && r.fullLoad !== undefined && r.ratioToRaw !== undefined && r.closedLoopRatioToRaw !== undefined;

/** The closed loop's, the raw ceiling's and full load's rows. */
function loadRows(l: LoadPhases): string[][] {
  return [
    [
      "closed",
      "reconciles/s (status observed)",
      `${l.closedLoop.reconcilesPerSecond} (${l.closedLoop.changes} in ${l.closedLoop.seconds} s, ${l.closedLoop.unobserved} unobserved)`,
    ],
    ["closed", "spec write → status seen", lat(l.closedLoop.latency)],
    ["closed", "time inside the function", lat(l.closedLoop.handlerLatency)],
    ["closed", "queue requests per change", queue(l.closedLoop.cpu, l.closedLoop.changes)],
    ["closed", "CPU", cpu(l.closedLoop.cpu)],
    ["raw", "status patches/s", `${l.rawCeiling.patchesPerSecond} (${l.rawCeiling.patches} in ${l.rawCeiling.seconds} s, ${l.rawCeiling.errors} errors)`],
    ["raw", "patch latency", lat(l.rawCeiling.latency)],
    ["raw", "CPU", cpu(l.rawCeiling.cpu)],
    ["full", "spec writes/s", `${l.fullLoad.writesPerSecond} (${l.fullLoad.writes} in ${l.fullLoad.seconds} s, ${l.fullLoad.writeErrors} errors)`],
    ["full", "reconciles/s (status observed)", `${l.fullLoad.reconcilesPerSecond}`],
    ["full", "reconciles handled (incl. superseded)", `${l.fullLoad.reconciles}, ${calls(l.fullLoad.apiCallsPerReconcile)} API calls each`],
    ["full", "CPU", cpu(l.fullLoad.cpu)],
    ["", "full load / raw ceiling", `${l.ratioToRaw}×`],
    ["", "closed loop / raw ceiling", `${l.closedLoopRatioToRaw}×`],
  ];
}

/** The Cloud Run target's publishes and push requests of a phase until the queue was at rest, per change. */
function pushRows(phase: string, p: PushSummary, changes: number): string[][] {
  const per = (n: number) => (n / Math.max(1, changes)).toFixed(2);
  return [
    [phase, "bridge publish calls / messages per change (to rest)", `${per(p.bridge.publishCalls)} / ${per(p.bridge.messages)}`],
    [
      phase,
      "push requests per change (first / again)",
      `${per(p.requests)} (${per(p.firstAttempts)} / ${per(p.redeliveries)}); ${p.acked} acked, ${p.refused} refused`,
    ],
    [phase, "push request wall time", lat(p.requestLatency)],
    [phase, "pushed message size (mean)", `${p.meanMessageBytes} bytes`],
  ];
}

export function formatReport(r: BenchResult, targets: readonly Target[]): string {
  const p = r.params;
  const mib = (b: number | null) => (b === null ? "n/a" : `${(b / MiB).toFixed(1)} MiB`);
  const consumer = p.receiveLoops === undefined ? "push deliverer as crdfn dev runs it" : `${p.receiveLoops} FIFO receive loop(s)`;
  const lines = [
    `crdfn pipeline benchmark (${p.target}) — ${p.objects} Greetings, ${p.rate} changes/s, ${p.durationSeconds} s phases, concurrency ${p.concurrency}, ${consumer}`,
    `machine: ${r.machine.cpus} cores, load average ${r.machine.loadAvgStart.map((x) => x.toFixed(2)).join(" ")} → ${r.machine.loadAvgEnd.map((x) => x.toFixed(2)).join(" ")}, node ${r.machine.node}`,
    "",
    table([
      ["phase", "measure", "value"],
      [
        "setup",
        "create / all Ready / queues empty",
        `${r.setup.createSeconds.toFixed(1)} s / ${r.setup.allReadySeconds.toFixed(1)} s / +${r.setup.drainSeconds} s`,
      ],
      ["setup", "API calls per reconcile (creation)", calls(r.setup.apiCallsPerReconcile)],
      ["rated", "spec write → status seen", lat(r.rated.latency)],
      ["rated", "writes / errors / unobserved", `${r.rated.writes} / ${r.rated.writeErrors} / ${r.rated.unobserved}`],
      ["rated", "API calls per reconcile (steady state)", calls(r.rated.apiCallsPerReconcile)],
      ["rated", "time inside the function", lat(r.rated.handlerLatency)],
      ["rated", "bridge publish delay (mean)", r.rated.cpu.bridgePublishDelayMs === null ? "n/a" : `${r.rated.cpu.bridgePublishDelayMs} ms`],
      ["rated", "queue requests per change", queue(r.rated.cpu, r.rated.writes)],
      ...(r.rated.pushes ? pushRows("rated", r.rated.pushes, r.rated.writes) : []),
      ["rated", "CPU", cpu(r.rated.cpu)],
      ...(hasLoadPhases(r) ? loadRows(r) : []),
      ["bridge", "process", `bundle, NODE_OPTIONS="${r.bridge.nodeOptions}"`],
      ["bridge", "RSS max (/proc) / (/metrics)", `${mib(r.bridge.maxRssBytes)} / ${mib(r.bridge.maxMetricRssBytes)}`],
      ["bridge", "heap used max (/metrics)", mib(r.bridge.maxHeapUsedBytes)],
    ]),
    "CPU is in percent of one core per process.",
    "",
    table([["target", "goal", "measured", ""], ...targets.map((t) => [t.name, t.goal, t.value, t.pass ? "PASS" : "MISS"])]),
  ];
  return lines.join("\n");
}
