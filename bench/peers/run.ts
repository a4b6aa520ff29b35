// One run of one system: a fresh namespace, the system started for it, then the same driver
// for every system — N Greetings created until all Ready, R changes/s for D seconds (open loop),
// C changes in flight for D seconds (closed loop), then, with the system stopped, the raw
// ceiling of status patches on the same objects — and the namespace deleted.
import { loadavg } from "node:os";
import type { SQSClient } from "@aws-sdk/client-sqs";
import { untilAdmissionInForce } from "../../cli/local/admission-in-force.ts";
import { KubeHttp } from "../../clients/kube-http.ts";
import { admissionPolicyOf, servedNamespacesPolicyOf } from "../../deploy/admission.ts";
import { DEV_FUNCTIONS_NAMESPACE } from "../../cli/local/dev-identities.ts";
import type { Operator } from "../../core/operator.ts";
import type { Reaper } from "../../emulator/reaper.ts";
import greeting from "../../examples/greeting/operator.ts";
import type { LocalCluster } from "../../emulator/types.ts";
import { createKubeApi } from "../../functions/runtime/kube-api-http.ts";
import { kube } from "../../test/support/kube-requests.ts";
import { atRate, changeTimer, forEachBounded, inFlight, measureRawCeiling } from "../drive.ts";
import { Greetings, objectName } from "../greetings.ts";
import { BRIDGE_METRICS, clusterPids, metricValues } from "../proc.ts";
import { untilQueuesEmpty } from "../queue-depth.ts";
import { summarizeLatency, type LatencySummary } from "../stats.ts";
import { StatusWatch } from "../status-watch.ts";
import { startSpanCollector } from "../span-collector.ts";
import type { StageBreakdown } from "../stages.ts";
import { operatorRequests, type RequestCounts } from "./api-requests.ts";
import { Sampler, type Usage } from "./sampler.ts";
import { startSystem, type Binaries, type SystemName } from "./systems.ts";

export interface RunOptions {
  objects: number;
  rate: number;
  durationSeconds: number;
  concurrency: number;
  /** crdfn only: its bridge and functions export their spans to a collector in the driver (the stage breakdown; tracing's cost beside an untraced run). */
  traced?: boolean;
  log: (line: string) => void;
}

export interface Cost {
  cpuSeconds: Record<string, number>;
  /** API server + etcd + the system's in-cluster part (bridge; a peer's whole operator). */
  clusterSideCpuMsPerChange: number;
  controlPlaneCpuMsPerChange: number;
  operatorCpuMsPerChange: number;
  /** The queue and the functions (crdfn only; 0 for peers). */
  offClusterCpuMsPerChange: number;
  driverCpuMsPerChange: number;
  /** Requests on greetings, greetings/status, configmaps and events, less the driver's own writes. */
  apiRequestsPerChange: number;
  requests: RequestCounts;
  machineBusyPercent: number;
}

export interface RunResult {
  system: SystemName;
  round: number;
  traced: boolean;
  /** A traced run's rated phase, stage by stage from the spans (bench/stages.ts); null untraced. */
  stages: (StageBreakdown & { spans: number; exports: number }) | null;
  namespace: string;
  startedAt: string;
  loadAvgStart: number[];
  loadAvgEnd: number[];
  startSeconds: number;
  settings: Record<string, unknown>;
  setup: { objects: number; createSeconds: number; allReadySeconds: number } & Cost;
  /** crdfn only: mean time from the bridge seeing a change to the queue accepting its event, per phase (ms). */
  bridgePublishDelayMs: { rated: number | null; closedLoop: number | null } | null;
  /** SendMessageBatch requests the bridge made per change (crdfn only). */
  bridgeSendRequestsPerChange: { rated: number | null; closedLoop: number | null } | null;
  rated: { ratePerSecond: number; seconds: number; writes: number; writeErrors: number; unobserved: number; latency: LatencySummary } & Cost;
  closedLoop: {
    concurrency: number;
    seconds: number;
    changes: number;
    changesPerSecond: number;
    writeErrors: number;
    unobserved: number;
    latency: LatencySummary;
  } & Cost;
  rawCeiling: { concurrency: number; seconds: number; patches: number; errors: number; patchesPerSecond: number; latency: LatencySummary };
  closedToRaw: number;
  peakRssMiB: Record<string, number>;
  clusterSidePeakRssMiB: number;
  offClusterPeakRssMiB: number;
}

const OBSERVE_TIMEOUT_MS = 30_000;
const now = (): number => performance.now();
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const r1 = (x: number): number => Math.round(x * 10) / 10;
const r2 = (x: number): number => Math.round(x * 100) / 100;

/** The bridge's publish delay and sends between two readings of its /metrics (crdfn only: null without them). */
function bridgeMetrics(url: string | undefined) {
  const { publishDelaySum, publishDelayCount, sendRequests } = BRIDGE_METRICS;
  const grown = (a: Record<string, number>, b: Record<string, number>, name: string): number => (b[name] ?? 0) - (a[name] ?? 0);
  return {
    mark: async (): Promise<Record<string, number>> => (url === undefined ? {} : metricValues(await (await fetch(url)).text(), Object.values(BRIDGE_METRICS))),
    publishDelay: (a: Record<string, number>, b: Record<string, number>): number | null => {
      const n = grown(a, b, publishDelayCount);
      return n > 0 ? r2((grown(a, b, publishDelaySum) / n) * 1000) : null;
    },
    sendsPer: (a: Record<string, number>, b: Record<string, number>, changes: number): number | null =>
      url === undefined ? null : r2(grown(a, b, sendRequests) / Math.max(1, changes)),
  };
}

export async function runOnce(
  system: SystemName,
  round: number,
  cluster: LocalCluster,
  sqs: SQSClient,
  bin: Binaries,
  reaper: Reaper,
  o: RunOptions,
): Promise<RunResult> {
  const startedAt = new Date().toISOString();
  const loadAvgStart = loadavg();
  const namespace = `peers-${system.replace(/[^a-z0-9]+/g, "-").replace(/-$/, "")}-r${round}${o.traced ? "-traced" : ""}`;
  const greetings = new Greetings(createKubeApi({ connection: cluster.kubeConfig }), namespace);
  await greetings.createNamespace();
  const watch = new StatusWatch(cluster.kubeConfig, namespace, now);
  await watch.start();
  const cleanup: Array<() => Promise<void> | void> = [() => watch.stop(), () => deleteNamespace(cluster, namespace, o.log)];
  try {
    o.log(`${system} r${round}: starting${o.traced ? ", traced" : ""}…`);
    const spans = o.traced ? await startSpanCollector() : undefined;
    if (spans) cleanup.push(() => spans.close());
    const running = await startSystem(system, namespace, cluster, bin, reaper, spans ? { env: spans.env } : {});
    let stopped = false;
    const stopSystem = async () => {
      if (!stopped) await running.stop();
      stopped = true;
    };
    cleanup.unshift(stopSystem);
    // crdfn runs as deployed: its admission policies admit Greetings only in the namespaces it
    // serves, this run's, and fence its function's writes. The next system's run is in another
    // namespace and should not pay crdfn's fence, so the policies go with the run.
    if (system === "crdfn") cleanup.push(() => deletePolicies(cluster, crdfnPolicies(greeting, namespace)));
    const control = clusterPids(Number(new URL(cluster.server).port));
    const controlPlane = { apiServer: control.apiServer ?? 0, etcd: control.etcd ?? 0 };
    const offCluster = system === "crdfn" ? { elasticMq: control.elasticMq ?? 0, ...running.offCluster } : running.offCluster;
    const sampler = new Sampler({ ...controlPlane, ...running.clusterSide, ...offCluster }, cluster.kubeConfig);
    sampler.start();
    cleanup.unshift(() => sampler.stop());
    const quiet = async () => {
      if (system === "crdfn") await untilQueuesEmpty(sqs, [cluster.sqs.queues.fifo], 120_000);
      else await sleep(500);
    };
    const { mark: publishMark, publishDelay, sendsPer } = bridgeMetrics(running.bridgeMetricsUrl);
    const sum = (u: Usage, names: Iterable<string>) => [...names].reduce((s, n) => s + (u.cpuSeconds[n] ?? 0), 0);
    const cost = (u: Usage, changes: number, driverWrites: number): Cost => {
      const per = (names: Iterable<string>) => r2((sum(u, names) * 1000) / Math.max(1, changes));
      return {
        cpuSeconds: u.cpuSeconds,
        clusterSideCpuMsPerChange: per([...Object.keys(controlPlane), ...Object.keys(running.clusterSide)]),
        controlPlaneCpuMsPerChange: per(Object.keys(controlPlane)),
        operatorCpuMsPerChange: per(Object.keys(running.clusterSide)),
        offClusterCpuMsPerChange: per(Object.keys(offCluster)),
        driverCpuMsPerChange: per(["driver"]),
        apiRequestsPerChange: r2(Math.max(0, operatorRequests(u.requests) - driverWrites) / Math.max(1, changes)),
        requests: u.requests,
        machineBusyPercent: u.machineBusyPercent,
      };
    };

    // Ready for work: a first object handled (kopf and crdfn say nothing when their watches are up).
    await greetings.create("warmup", "warm up");
    if ((await watch.reconciled("warmup", 1, 120_000)) === undefined)
      throw new Error(`${system} never reconciled its first Greeting (log: ${running.logFile})`);

    const names = Array.from({ length: o.objects }, (_, i) => objectName(i));
    o.log(`${system} r${round}: creating ${o.objects} Greetings…`);
    let mark = await sampler.mark();
    const t0 = now();
    await forEachBounded(o.objects, 16, async (i) => {
      await greetings.create(names[i] ?? "", `hello ${i}`);
    });
    const createSeconds = (now() - t0) / 1000;
    const deadline = now() + 120_000 + o.objects * 200;
    while (watch.countAtLeast(1) < o.objects + 1) {
      if (now() > deadline) throw new Error(`${system}: only ${watch.countAtLeast(1) - 1} of ${o.objects} Greetings became Ready`);
      await sleep(20);
    }
    const allReadySeconds = (now() - t0) / 1000;
    const setup = {
      objects: o.objects,
      createSeconds: r2(createSeconds),
      allReadySeconds: r2(allReadySeconds),
      ...cost(await sampler.since(mark), o.objects, o.objects),
    };
    await quiet();

    const change = changeTimer({ greetings, watch, names, now, timeoutMs: OBSERVE_TIMEOUT_MS });

    o.log(`${system} r${round}: rated ${o.rate}/s for ${o.durationSeconds} s…`);
    mark = await sampler.mark();
    let published = await publishMark();
    const ratedLatencies: number[] = [];
    const ratedCounts = { errors: 0, unobserved: 0 };
    const ratedPhase = spans?.phase();
    const writes = await atRate(o.rate, o.durationSeconds * 1000, (k) => change(k % o.objects, `rated ${k}`, ratedLatencies, ratedCounts), now);
    const ratedWindow = ratedPhase?.end();
    const ratedUsage = await sampler.since(mark);
    const ratedMark = await publishMark();
    const ratedPublishDelay = publishDelay(published, ratedMark);
    const ratedSends = sendsPer(published, ratedMark, writes);
    const rated = {
      ratePerSecond: o.rate,
      seconds: ratedUsage.seconds,
      writes,
      writeErrors: ratedCounts.errors,
      unobserved: ratedCounts.unobserved,
      latency: summarizeLatency(ratedLatencies),
      ...cost(ratedUsage, ratedLatencies.length, writes),
    };
    await quiet();

    // Each writer owns its own objects, so no two changes in flight touch the same one.
    const workers = Math.min(o.concurrency, o.objects);
    const objectOf = (w: number, k: number): number => (w + k * workers) % o.objects;
    o.log(`${system} r${round}: closed loop, ${workers} in flight for ${o.durationSeconds} s…`);
    mark = await sampler.mark();
    published = await publishMark();
    const closedLatencies: number[] = [];
    const closedCounts = { errors: 0, unobserved: 0 };
    const t = now();
    await inFlight(workers, o.durationSeconds * 1000, (w, k) => change(objectOf(w, k), `closed ${k}`, closedLatencies, closedCounts), now);
    const closedSeconds = (now() - t) / 1000;
    const closedWrites = closedLatencies.length + closedCounts.unobserved;
    const closedLoop = {
      concurrency: workers,
      seconds: r2(closedSeconds),
      changes: closedLatencies.length,
      changesPerSecond: r1(closedLatencies.length / closedSeconds),
      writeErrors: closedCounts.errors,
      unobserved: closedCounts.unobserved,
      latency: summarizeLatency(closedLatencies),
      ...cost(await sampler.since(mark), closedLatencies.length, closedWrites),
    };
    const closedMark = await publishMark();
    const closedPublishDelay = publishDelay(published, closedMark);
    const closedSends = sendsPer(published, closedMark, closedLatencies.length);
    await quiet();
    const peakRssMiB = sampler.peakRssMiB();
    const peaks = (names: Iterable<string>) => r1([...names].reduce((s, n) => s + (peakRssMiB[n] ?? 0), 0));

    // The raw ceiling gets the API server to itself: the system is stopped first.
    await stopSystem();
    const stages = spans && ratedWindow ? spans.breakdown(ratedWindow) : null;
    o.log(`${system} r${round}: raw ceiling, ${workers} status patches in flight for ${o.durationSeconds} s…`);
    const {
      latencies: rawLatencies,
      errors: rawErrors,
      seconds: rawSeconds,
    } = await measureRawCeiling(workers, o.durationSeconds * 1000, (w, k) => greetings.patchStatus(names[objectOf(w, k)] ?? "", k), now);
    const rawCeiling = {
      concurrency: workers,
      seconds: r2(rawSeconds),
      patches: rawLatencies.length,
      errors: rawErrors,
      patchesPerSecond: r1(rawLatencies.length / rawSeconds),
      latency: summarizeLatency(rawLatencies),
    };

    return {
      system,
      round,
      traced: Boolean(o.traced),
      stages,
      namespace,
      startedAt,
      loadAvgStart,
      loadAvgEnd: loadavg(),
      startSeconds: running.startSeconds,
      settings: running.settings,
      bridgePublishDelayMs: running.bridgeMetricsUrl === undefined ? null : { rated: ratedPublishDelay, closedLoop: closedPublishDelay },
      bridgeSendRequestsPerChange: running.bridgeMetricsUrl === undefined ? null : { rated: ratedSends, closedLoop: closedSends },
      setup,
      rated,
      closedLoop,
      rawCeiling,
      closedToRaw: Math.round((closedLoop.changesPerSecond / Math.max(0.001, rawCeiling.patchesPerSecond)) * 1000) / 1000,
      peakRssMiB,
      clusterSidePeakRssMiB: peaks(Object.keys(running.clusterSide)),
      offClusterPeakRssMiB: peaks(Object.keys(offCluster)),
    };
  } finally {
    for (const step of cleanup) await step();
  }
}

/**
 * The admission policies a crdfn run leaves in the cluster (names are what deletePolicies needs):
 * its kind's served namespaces, and its function's fence. The fence matches every namespace (it
 * refuses the function's writes outside the served ones), so left in place its match condition
 * would run for the next system's writes too: about 0.1 ms of API-server CPU each
 * (docs/performance.md, where the policy's CPU goes).
 */
export const crdfnPolicies = (operator: Operator<unknown>, namespace: string): Array<Record<string, unknown>> => [
  ...admissionPolicyOf(operator, { functionsNamespace: DEV_FUNCTIONS_NAMESPACE, namespaces: [namespace], denied: [] }),
  ...servedNamespacesPolicyOf(operator, [namespace]),
];

/** Deletes admission policies and their bindings, and waits until the API server no longer applies them. */
export async function deletePolicies(cluster: LocalCluster, manifests: ReadonlyArray<Record<string, unknown>>): Promise<void> {
  for (const m of [...manifests].reverse() as Array<{ apiVersion: string; kind: string; metadata: { name: string } }>) {
    const plural = m.kind === "ValidatingAdmissionPolicy" ? "validatingadmissionpolicies" : "validatingadmissionpolicybindings";
    await kube(cluster.kubeConfig, "DELETE", `/apis/${m.apiVersion}/${plural}/${m.metadata.name}`);
  }
  await untilAdmissionInForce(new KubeHttp({ connection: cluster.kubeConfig }), { probe: "crdfn-bench-policies-dropped", namespace: "default" });
}

/** Deletes the run's namespace and waits until it is gone, so the next run starts clean. */
async function deleteNamespace(cluster: LocalCluster, namespace: string, log: (line: string) => void): Promise<void> {
  await kube(cluster.kubeConfig, "DELETE", `/api/v1/namespaces/${namespace}`);
  const deadline = now() + 600_000;
  while ((await kube(cluster.kubeConfig, "GET", `/api/v1/namespaces/${namespace}`)).status !== 404) {
    if (now() > deadline) {
      log(`namespace ${namespace} still terminating after 600 s; going on`);
      return;
    }
    await sleep(500);
  }
}
