// One system's run of bench:platform, in a namespace of its own: the system started for all the
// kinds; one object per kind reconciled (its watches are up); N objects per kind created until all
// are Ready; the system left alone for the idle window (CPU, RSS, watches held open on the API
// server); then changes at a fixed rate spread over the kinds (latency, CPU, API and queue
// requests per change); then the system stopped. The driver (this process) is the same for both.
import { mkdtempSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import type { KubeConfig } from "@kubernetes/client-node";
import type { SQSClient } from "@aws-sdk/client-sqs";
import type { Reaper } from "../../emulator/reaper.ts";
import type { LocalCluster } from "../../emulator/types.ts";
import { createKubeApi } from "../../functions/runtime/kube-api-http.ts";
import { crdfnProfiles, type ProfileSummary } from "../cpu-profile.ts";
import { atRate, changeTimer, forEachBounded, type ChangeCounts } from "../drive.ts";
import { Greetings } from "../greetings.ts";
import { BRIDGE_METRICS, clusterPids, cpuSeconds, metricValues, rssBytes, splitAfterStart, splitBeforeStart } from "../proc.ts";
import { untilQueuesEmpty } from "../queue-depth.ts";
import { summarizeLatency, type LatencySummary } from "../stats.ts";
import { StatusWatch } from "../status-watch.ts";
import { operatorRequests, parseOpenWatches, scrapeMetrics, serverMsPerRequest, type RequestCounts } from "../peers/api-requests.ts";
import { crdfnPolicies, deletePolicies } from "../peers/run.ts";
import { Sampler, type Usage } from "../peers/sampler.ts";
import { startSpanCollector } from "../span-collector.ts";
import type { StageBreakdown } from "../stages.ts";
import { platformObjectName, platformOperator, type PlatformKind } from "./kinds.ts";
import { startPlatform, type PlatformSystem } from "./systems.ts";

export interface PlatformRunOptions {
  objectsPerKind: number;
  rate: number;
  ratedSeconds: number;
  idleSeconds: number;
  /** The cluster side on CPU 0, the off-cluster side and this driver on CPU 1 (bench/proc.ts). */
  split: boolean;
  /** crdfn's bridge and function process CPU-profiled over the whole run (`--profile`). */
  profile?: boolean;
  /** crdfn only: its bridge and functions export their spans to a collector in the driver (the stage breakdown; tracing's cost beside an untraced run). */
  traced?: boolean;
  log: (line: string) => void;
}

/** Watches the system held open on the API server: the gauge's total less the one before it started, sampled while it idled. */
export interface WatchCount {
  samples: number;
  median: number;
  min: number;
  max: number;
  /** Before the system started (the driver's status watches, the controller-manager's). */
  baseline: number;
  /** One sample's growth by resource. */
  byResource: Record<string, number>;
}

export interface PlatformRun {
  system: PlatformSystem;
  traced: boolean;
  /** A traced run's rated phase, stage by stage from the spans (bench/stages.ts); null untraced. */
  stages: (StageBreakdown & { spans: number; exports: number }) | null;
  namespace: string;
  startedAt: string;
  loadAvgStart: number[];
  loadAvgEnd: number[];
  startSeconds: number;
  settings: Record<string, unknown>;
  setup: { kinds: number; objects: number; createSeconds: number; allReadySeconds: number };
  watches: WatchCount;
  idle: {
    seconds: number;
    /** Seconds the settling took before the window began (CPU of the system under 2 % of a core over 2 s). */
    settleSeconds: number;
    cpuSeconds: Record<string, number>;
    /** The system's cluster-side processes, in percent of one core over the window. */
    clusterSideCpuPercent: number;
    offClusterCpuPercent: number;
    controlPlaneCpuPercent: number;
    apiRequests: number;
    loadAvg: number[];
  };
  rss: {
    /** Sum over the cluster-side processes of each one's highest RSS (sampled every 250 ms) over the run. */
    clusterSidePeakMiB: number;
    /** Their sum at the end of the idle window. */
    clusterSideIdleMiB: number;
    offClusterPeakMiB: number;
    peakMiB: Record<string, number>;
  };
  rated: {
    ratePerSecond: number;
    seconds: number;
    writes: number;
    writeErrors: number;
    unobserved: number;
    /** Changes seen reconciled per second of the phase. */
    observedPerSecond: number;
    latency: LatencySummary;
    clusterSideCpuMsPerChange: number;
    controlPlaneCpuMsPerChange: number;
    offClusterCpuMsPerChange: number;
    /** The same, by process (the API server, etcd, the bridge or each operator, ElasticMQ, the functions). */
    cpuMsPerChangeByProcess: Record<string, number>;
    /** On the kinds, their status, ConfigMaps and Events, less the driver's own spec writes; per change written, as the CPU figures. */
    apiRequestsPerChange: number;
    requests: RequestCounts;
    /**
     * The API server's own mean time per request on the kinds, their status, ConfigMaps and
     * Events, the kinds folded into "<kinds>" (the driver's spec writes included): how much of a
     * change's latency is the server's.
     */
    serverMsPerRequest: Record<string, number>;
    /** Every request to the queue (crdfn only): the bridge's sends from its /metrics, the poller's and functions' by command. */
    queueRequests: Record<string, number> | null;
    /** Per spec change written (as npm run bench counts it). */
    queueRequestsPerChange: number | null;
    /**
     * crdfn only, where a change's time goes: reconciles run (a change's, and the bridge's
     * follow-ups), mean time inside the function, mean time from the bridge seeing a change to the
     * queue accepting its event; the rest of the p50 is the queue (and the poller's receives).
     */
    pipeline: { reconciles: number; functionMsPerReconcile: number; bridgePublishDelayMs: number } | null;
    loadAvg: number[];
  };
  /** crdfn with `--profile`: top self time of the bridge and the function process over the whole run. */
  profiles?: Record<string, ProfileSummary>;
}

const OBSERVE_TIMEOUT_MS = 30_000;
const now = (): number => performance.now();
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const r1 = (x: number): number => Math.round(x * 10) / 10;
const r2 = (x: number): number => Math.round(x * 100) / 100;
const MiB = 1048576;

/** Watches open on the API server now, by resource. */
export const openWatches = async (kubeConfig: KubeConfig): Promise<Record<string, number>> => parseOpenWatches(await scrapeMetrics(kubeConfig));
const total = (r: Record<string, number>): number => Object.values(r).reduce((a, b) => a + b, 0);
const grown = (before: Record<string, number>, after: Record<string, number>): Record<string, number> =>
  Object.fromEntries(Object.entries(after).flatMap(([k, v]): Array<[string, number]> => (v === (before[k] ?? 0) ? [] : [[k, v - (before[k] ?? 0)]])));
const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? 0 : (s[Math.floor((s.length - 1) / 2)] ?? 0);
};

interface PipelineCounts {
  /** The queue's requests: the bridge's sends (its /metrics) and the poller's and functions' (the child's counts). */
  queueRequests: Record<string, number>;
  reconciles: number;
  /** Time inside the functions, summed. */
  reconcileMs: number;
  publishDelaySum: number;
  publishDelayCount: number;
}

async function pipelineCounts(bridgeMetricsUrl: string, childUrl: string): Promise<PipelineCounts> {
  const { sendRequests, publishDelaySum, publishDelayCount } = BRIDGE_METRICS;
  const bridge = metricValues(await (await fetch(bridgeMetricsUrl)).text(), [sendRequests, publishDelaySum, publishDelayCount]);
  const child = (await (await fetch(childUrl)).json()) as { queueRequests: Record<string, number>; reconciles: number; reconcileMs: number };
  return {
    queueRequests: { "bridge SendMessageBatch": bridge[sendRequests] ?? 0, ...child.queueRequests },
    reconciles: child.reconciles,
    reconcileMs: child.reconcileMs,
    publishDelaySum: bridge[publishDelaySum] ?? 0,
    publishDelayCount: bridge[publishDelayCount] ?? 0,
  };
}

/** Reconciles, time inside the function and the bridge's publish delay between two readings of the counts. */
function pipelineBetween(a: PipelineCounts | null, b: PipelineCounts | null): PlatformRun["rated"]["pipeline"] {
  if (a === null || b === null) return null;
  const reconciles = b.reconciles - a.reconciles;
  return {
    reconciles,
    functionMsPerReconcile: r1((b.reconcileMs - a.reconcileMs) / Math.max(1, reconciles)),
    bridgePublishDelayMs: r1(((b.publishDelaySum - a.publishDelaySum) / Math.max(1, b.publishDelayCount - a.publishDelayCount)) * 1000),
  };
}

/**
 * Waits until the system's cluster-side processes are near idle (under 2 % of a core over 2 s; a
 * controller's follow-ups of its own status writes, the bridge's announcements of children), at
 * most 120 s: measured, not waited out. Returns the seconds it took.
 */
async function settle(pids: readonly number[]): Promise<number> {
  const t = now();
  const used = () => pids.reduce((s, pid) => s + (cpuSeconds(pid) ?? 0), 0);
  for (let before = used(); ;) {
    await sleep(2000);
    const after = used();
    if (after - before < 0.04 || now() - t > 120_000) break;
    before = after;
  }
  return r1((now() - t) / 1000);
}

/** Requests and server seconds on `resources`, the kinds folded into one key each, as mean ms per request. */
function serverMs(u: Usage, resources: readonly string[], kinds: readonly PlatformKind[]): Record<string, number> {
  const plurals = new Set(kinds.map((k) => k.plural));
  const fold = (c: RequestCounts): RequestCounts => {
    const out: RequestCounts = {};
    for (const [key, v] of Object.entries(c)) {
      const [verb = "", resource = ""] = key.split(" ");
      // A watch's "duration" is how long it stayed open, not time spent serving it.
      if (verb === "WATCH" || !resources.includes(resource)) continue;
      const [plural = "", sub] = resource.split("/");
      const folded = `${verb} ${plurals.has(plural) ? "<kinds>" : plural}${sub ? `/${sub}` : ""}`;
      out[folded] = (out[folded] ?? 0) + v;
    }
    return out;
  };
  const counts = fold(u.requests);
  return serverMsPerRequest(counts, fold(u.serverSeconds), Object.keys(counts).sort());
}

export async function runPlatform(
  system: PlatformSystem,
  kinds: readonly PlatformKind[],
  cluster: LocalCluster,
  sqs: SQSClient,
  controllerRuntime: string,
  reaper: Reaper,
  o: PlatformRunOptions,
): Promise<PlatformRun> {
  const startedAt = new Date().toISOString();
  const loadAvgStart = loadavg();
  const namespace = `platform-${system}${o.traced ? "-traced" : ""}`;
  const api = createKubeApi({ connection: cluster.kubeConfig });
  const writers = kinds.map((k) => new Greetings(api, namespace, k));
  await writers[0]?.createNamespace();
  const watches = kinds.map((k) => new StatusWatch(cluster.kubeConfig, namespace, now, k));
  const cleanup: Array<() => Promise<void> | void> = [() => watches.forEach((w) => w.stop())];
  try {
    const others = await openWatches(cluster.kubeConfig);
    await Promise.all(watches.map((w) => w.start()));
    // Before the system starts: the watches everyone else holds (the controller-manager's, and
    // ours above once the API server counts them: a watch of a kind whose watch cache is still
    // initializing is answered, and counted, a little after the client's request resolves).
    let baseline = await openWatches(cluster.kubeConfig);
    for (const t = now(); kinds.some((k) => (baseline[k.plural] ?? 0) < (others[k.plural] ?? 0) + 1); baseline = await openWatches(cluster.kubeConfig)) {
      if (now() - t > 60_000) throw new Error(`the API server never counted the driver's watches of ${kinds.map((k) => k.plural).join(", ")}`);
      await sleep(200);
    }
    o.log(`${system}: starting for ${kinds.length} kinds${o.traced ? ", traced" : ""}…`);
    const spans = o.traced ? await startSpanCollector() : undefined;
    if (spans) cleanup.push(() => spans.close());
    const control = clusterPids(Number(new URL(cluster.server).port));
    if (o.split) splitBeforeStart(control);
    const profileDir = o.profile && system === "crdfn" ? mkdtempSync(join(tmpdir(), "crdfn-platform-prof-")) : undefined;
    const running = await startPlatform(system, kinds, namespace, cluster, controllerRuntime, reaper, {
      ...(profileDir === undefined ? {} : { cpuProfileDir: profileDir }),
      ...(spans ? { env: spans.env } : {}),
    });
    if (o.split) splitAfterStart(Object.values(running.offCluster));
    let stopped = false;
    const stopSystem = async () => {
      if (!stopped) await running.stop();
      stopped = true;
    };
    cleanup.unshift(stopSystem);
    // crdfn as deployed admits its kinds only in the namespaces it serves, and fences its functions'
    // writes everywhere; the next system's run is in another namespace, and pays neither.
    if (system === "crdfn")
      cleanup.push(() =>
        deletePolicies(
          cluster,
          kinds.flatMap((k) => crdfnPolicies(platformOperator(k), namespace)),
        ),
      );

    const controlPlane = { apiServer: control.apiServer ?? 0, etcd: control.etcd ?? 0 };
    const offCluster = system === "crdfn" ? { elasticMq: control.elasticMq ?? 0, ...running.offCluster } : running.offCluster;
    const sampler = new Sampler({ ...controlPlane, ...running.clusterSide, ...offCluster }, cluster.kubeConfig);
    sampler.start();
    cleanup.unshift(() => sampler.stop());
    const sum = (u: Usage, names: Iterable<string>) => [...names].reduce((s, n) => s + (u.cpuSeconds[n] ?? 0), 0);
    const clusterSideNames = Object.keys(running.clusterSide);
    const drained = async () => {
      if (system === "crdfn") await untilQueuesEmpty(sqs, [cluster.sqs.queues.fifo], 300_000);
    };

    // Ready for work: one object of every kind reconciled.
    await Promise.all(writers.map((g, i) => g.create(`${kinds[i]?.prefix}-warmup`, "warm up")));
    for (const [i, w] of watches.entries()) {
      if ((await w.reconciled(`${kinds[i]?.prefix}-warmup`, 1, 120_000)) === undefined)
        throw new Error(`${system} never reconciled its first ${kinds[i]?.kind} (logs: ${running.logDir})`);
    }

    const count = o.objectsPerKind * kinds.length;
    o.log(`${system}: creating ${o.objectsPerKind} objects of each of ${kinds.length} kinds (${count})…`);
    const t0 = now();
    // Interleaved over the kinds, as ten teams' objects arrive.
    await forEachBounded(count, 16, async (n) => {
      const k = n % kinds.length;
      await writers[k]?.create(platformObjectName(kinds[k] as PlatformKind, Math.floor(n / kinds.length)), `hello ${n}`);
    });
    const createSeconds = (now() - t0) / 1000;
    const deadline = now() + 120_000 + count * 200;
    const ready = () => watches.reduce((s, w) => s + w.countAtLeast(1), 0) - kinds.length;
    while (ready() < count) {
      if (now() > deadline) throw new Error(`${system}: only ${ready()} of ${count} objects became Ready`);
      await sleep(50);
    }
    const allReadySeconds = (now() - t0) / 1000;
    o.log(`${system}: all ${count} Ready in ${allReadySeconds.toFixed(1)} s`);
    await drained();

    const settleSeconds = await settle(Object.values(running.clusterSide));

    o.log(`${system}: idle for ${o.idleSeconds} s…`);
    const idleMark = await sampler.mark();
    const watchSamples: number[] = [];
    let byResource: Record<string, number> = {};
    const idleEnd = now() + o.idleSeconds * 1000;
    while (now() < idleEnd) {
      const open = await openWatches(cluster.kubeConfig);
      watchSamples.push(total(open) - total(baseline));
      byResource = grown(baseline, open);
      await sleep(Math.min(10_000, Math.max(0, idleEnd - now())));
    }
    const idleUsage = await sampler.since(idleMark);
    const percent = (names: Iterable<string>) => r2((sum(idleUsage, names) / Math.max(0.001, idleUsage.seconds)) * 100);
    const idle = {
      seconds: idleUsage.seconds,
      settleSeconds,
      cpuSeconds: idleUsage.cpuSeconds,
      clusterSideCpuPercent: percent(clusterSideNames),
      offClusterCpuPercent: percent(Object.keys(offCluster)),
      controlPlaneCpuPercent: percent(Object.keys(controlPlane)),
      apiRequests: total(idleUsage.requests),
      loadAvg: loadavg(),
    };
    const clusterSideIdleMiB = r1(clusterSideNames.reduce((s, n) => s + (rssBytes(running.clusterSide[n] ?? 0) ?? 0), 0) / MiB);

    o.log(`${system}: ${o.rate} changes/s over ${kinds.length} kinds for ${o.ratedSeconds} s…`);
    const timers = kinds.map((k, i) =>
      changeTimer({
        greetings: writers[i] as Greetings,
        watch: watches[i] as StatusWatch,
        names: Array.from({ length: o.objectsPerKind }, (_, j) => platformObjectName(k, j)),
        now,
        timeoutMs: OBSERVE_TIMEOUT_MS,
      }),
    );
    const counted = running.bridgeMetricsUrl && running.queueRequestsUrl ? { bridge: running.bridgeMetricsUrl, child: running.queueRequestsUrl } : null;
    const countsMark = counted ? await pipelineCounts(counted.bridge, counted.child) : null;
    const ratedMark = await sampler.mark();
    const latencies: number[] = [];
    const counts: ChangeCounts = { errors: 0, unobserved: 0 };
    const ratedPhase = spans?.phase();
    const writes = await atRate(
      o.rate,
      o.ratedSeconds * 1000,
      (n) => (timers[n % kinds.length] as ReturnType<typeof changeTimer>)(Math.floor(n / kinds.length) % o.objectsPerKind, `rated ${n}`, latencies, counts),
      now,
    );
    const ratedWindow = ratedPhase?.end();
    const rated = await sampler.since(ratedMark);
    const ratedLoad = loadavg();
    await drained();
    const countsEnd = counted ? await pipelineCounts(counted.bridge, counted.child) : null;
    const queueRequests = countsMark && countsEnd ? grown(countsMark.queueRequests, countsEnd.queueRequests) : null;
    const pipeline = pipelineBetween(countsMark, countsEnd);
    // Per change written: every written change is reconciled within the phase's window (a change
    // seen late is still worked on before the window closes), so dividing by the changes seen
    // in time would charge a backlog's work to fewer changes.
    const changes = Math.max(1, writes);
    const per = (names: Iterable<string>) => r2((sum(rated, names) * 1000) / changes);
    const resources = [...kinds.flatMap((k) => [k.plural, `${k.plural}/status`]), "configmaps", "events"];
    const peakMiB = sampler.peakRssMiB();
    const peaks = (names: Iterable<string>) => r1([...names].reduce((s, n) => s + (peakMiB[n] ?? 0), 0));
    await stopSystem();
    const stages = spans && ratedWindow ? spans.breakdown(ratedWindow) : null;
    const profiles = profileDir === undefined ? undefined : crdfnProfiles(profileDir, o.log);
    return {
      system,
      traced: Boolean(o.traced),
      stages,
      namespace,
      startedAt,
      loadAvgStart,
      loadAvgEnd: loadavg(),
      startSeconds: running.startSeconds,
      settings: running.settings,
      setup: { kinds: kinds.length, objects: count, createSeconds: r2(createSeconds), allReadySeconds: r2(allReadySeconds) },
      watches: {
        samples: watchSamples.length,
        median: median(watchSamples),
        min: Math.min(...watchSamples),
        max: Math.max(...watchSamples),
        baseline: total(baseline),
        byResource,
      },
      idle,
      rss: { clusterSidePeakMiB: peaks(clusterSideNames), clusterSideIdleMiB, offClusterPeakMiB: peaks(Object.keys(offCluster)), peakMiB },
      rated: {
        ratePerSecond: o.rate,
        seconds: rated.seconds,
        writes,
        writeErrors: counts.errors,
        unobserved: counts.unobserved,
        observedPerSecond: r1(latencies.length / Math.max(0.001, rated.seconds)),
        latency: summarizeLatency(latencies),
        clusterSideCpuMsPerChange: per(clusterSideNames),
        controlPlaneCpuMsPerChange: per(Object.keys(controlPlane)),
        offClusterCpuMsPerChange: per(Object.keys(offCluster)),
        cpuMsPerChangeByProcess: Object.fromEntries(Object.keys(rated.cpuSeconds).map((n) => [n, per([n])])),
        apiRequestsPerChange: r2(Math.max(0, operatorRequests(rated.requests, resources) - writes) / changes),
        requests: rated.requests,
        serverMsPerRequest: serverMs(rated, resources, kinds),
        queueRequests,
        queueRequestsPerChange: queueRequests === null ? null : r2(total(queueRequests) / Math.max(1, writes)),
        pipeline,
        loadAvg: ratedLoad,
      },
      ...(profiles === undefined ? {} : { profiles }),
    };
  } finally {
    for (const step of cleanup) await step();
  }
}
