// `npm run bench:coldscale`: a cold start at scale. N Greetings (examples/greeting)
// are created in a fresh namespace before any operator runs; then the system is started for that
// namespace and timed from its spawn to every Greeting Ready (status reports its generation
// reconciled, seen by a watch). crdfn runs as the local stack runs it (cli/local/pipeline.ts: the
// bridge as its own process, the SQS poller and the functions in another, ElasticMQ);
// controller-runtime with 8 workers (bench/peers) on the same cluster, in its own namespace.
// Beside the time: CPU seconds per process from /proc, the API server's requests by verb from its
// /metrics, the Ready count over time, and crdfn's bridge and function process CPU-profiled.
import { existsSync, mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { basename, dirname, join, resolve } from "node:path";
import { Command, InvalidArgumentError, Option } from "commander";
import { installCrds } from "../cli/local/install-crds.ts";
import { DEFAULT_RECEIVE_LOOPS } from "../cli/local/pipeline.ts";
import type { Operator } from "../core/operator.ts";
import { startCluster } from "../emulator/cluster.ts";
import { packageRoot } from "../emulator/paths.ts";
import { startReaper, type Reaper } from "../emulator/reaper.ts";
import type { LocalCluster } from "../emulator/types.ts";
import greeting from "../examples/greeting/operator.ts";
import { DeleteQueueCommand, GetQueueAttributesCommand, PurgeQueueCommand } from "@aws-sdk/client-sqs";
import { KubeHttp } from "../clients/kube-http.ts";
import { sqsClient } from "../clients/sqs-client.ts";
import { ensureQueues, queueDefinitions } from "../emulator/queues.ts";
import { createKubeApi } from "../functions/runtime/kube-api-http.ts";
import { crdfnProfiles, type ProfileSummary } from "./cpu-profile.ts";
import { REQUEST_CATEGORIES, startApiServerProfile, type ApiServerProfiling } from "./api-server-profile.ts";
import { forEachBounded } from "./drive.ts";
import { Greetings, objectName } from "./greetings.ts";
import { buildControllerRuntime, missingToolchains } from "./peers/build.ts";
import { requestDelta, scrapeRequestCounts, type RequestCounts } from "./peers/api-requests.ts";
import { crdfnPolicies, deletePolicies } from "./peers/run.ts";
import { RECEIVE_LOOPS_ENV, SYSTEMS, startSystem, type SystemName } from "./peers/systems.ts";
import {
  busyPercent,
  clusterPids,
  coreTicks,
  cpuSeconds,
  elasticMqPid,
  machineTicks,
  rssBytes,
  splitAfterStart,
  splitBeforeStart,
  splitRefusal,
} from "./proc.ts";
import { stream } from "./queue-stream.ts";
import { StatusWatch } from "./status-watch.ts";
import { QUEUE_IN_MEMORY_HELP, runBench } from "./command-line.ts";

const CREATE_CONCURRENCY = 64;
const PUBLISHED = "crdfn_bridge_events_published_total";
const SEND_REQUESTS = "crdfn_bridge_send_requests_total";
const now = (): number => performance.now();

/** A counter of the bridge's metrics summed by one label's value (all under "" when `label` is ""). */
function counterBy(text: string, name: string, label: string): Record<string, number> {
  const by: Record<string, number> = {};
  const labelValue = new RegExp(`[{,]${label}="([^"]*)"`);
  for (const line of text.split("\n")) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    const value = label === "" ? "" : (labelValue.exec(line)?.[1] ?? "");
    by[value] = (by[value] ?? 0) + (Number(line.slice(line.lastIndexOf(" ") + 1)) || 0);
  }
  return by;
}

/** Events the bridge's queue accepted, by the `type` label of its counter (ADDED, MODIFIED…). */
async function publishedByType(metricsUrl: string): Promise<Record<string, number>> {
  return counterBy(await (await fetch(metricsUrl)).text(), PUBLISHED, "type");
}

/** Events the bridge's queue accepted, of every type. */
const publishedCount = async (metricsUrl: string): Promise<number> => Object.values(await publishedByType(metricsUrl)).reduce((a, b) => a + b, 0);

/**
 * Empties the event queues before a crdfn run: a bridge that stops sends what it still held (the
 * last run's), and this run's functions would otherwise handle those messages about objects of a
 * namespace they do not serve (a NamespaceNotServed Warning Event and a GET each). Returns how many
 * messages were left.
 */
async function purgeQueues(cluster: LocalCluster): Promise<number> {
  const sqs = sqsClient(cluster.sqs);
  try {
    let left = 0;
    for (const url of [cluster.sqs.queues.fifo, cluster.sqs.queues.fifoDlq]) {
      const { Attributes } = await sqs.send(
        new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"] }),
      );
      left += Object.values(Attributes ?? {}).reduce((n, v) => n + Number(v), 0);
      await sqs.send(new PurgeQueueCommand({ QueueUrl: url }));
    }
    return left;
  } finally {
    sqs.destroy();
  }
}

/**
 * Deletes a run's namespace and waits until it is gone, so that the next run starts in a cluster
 * without another run's objects: crdfn's pipeline, as `crdfn dev` starts, records a
 * NamespaceNotServed Event on every Greeting in a namespace it does not serve (cli/unserved.ts),
 * which made a later run pay one POST per earlier object, and a Warning Event each.
 *
 * The ConfigMaps go first, and then it waits until nobody GETs ConfigMaps any more: once the
 * Greetings went with ConfigMaps still behind them, the API server went on serving GETs of
 * ConfigMaps that no system asked for, 0.3-0.5 per object, into the next run, whichever system
 * that was (kube-controller-manager's garbage collector, checking each dependent of a deleted
 * owner at its client's own rate, is the likely sender).
 */
async function removeNamespace(cluster: LocalCluster, namespace: string, log: (l: string) => void): Promise<void> {
  const api = createKubeApi({ connection: cluster.kubeConfig });
  const ref = { group: "", version: "v1", plural: "namespaces", name: namespace };
  const t0 = now();
  const gets = async () => (await scrapeRequestCounts(cluster.kubeConfig))["GET configmaps"] ?? 0;
  const getsBefore = await gets();
  const children = await new KubeHttp({ connection: cluster.kubeConfig, timeoutMs: 600_000 }).request("DELETE", `/api/v1/namespaces/${namespace}/configmaps`);
  if (children.status >= 300) log(`  deleting ${namespace}'s ConfigMaps first: HTTP ${children.status} ${children.text.slice(0, 200)}`);
  await api.delete(ref).catch(() => undefined);
  while ((await api.get(ref)) !== undefined) {
    if (now() - t0 > 600_000) throw new Error(`namespace ${namespace} not gone 600 s after its deletion`);
    await sleep(1000);
  }
  const gone = now();
  let [last, still] = [await gets(), now()];
  while (now() - still < QUIET_MS && now() - gone < 600_000) {
    await sleep(1000);
    const n = await gets();
    if (n !== last) [last, still] = [n, now()];
  }
  log(
    `  ${namespace} deleted in ${((gone - t0) / 1000).toFixed(0)} s; ${last - getsBefore} GETs of ConfigMaps meanwhile, ` +
      `the last ${((still - gone) / 1000).toFixed(0)} s after it was gone`,
  );
}

/** How long no GET of a ConfigMap must come before the next run starts. */
const QUIET_MS = 10_000;

/**
 * Streams n messages (--warm-queue) through a scratch queue of ElasticMQ before any system runs: its
 * JVM compiles as it goes (a message cost 3.8 ms of its CPU in the first 10,000 and about 2 after,
 * bench:queuedepth --steady), which made crdfn's first run in a bench slower than a later one by
 * ElasticMQ's compiling alone; SQS has no such start.
 */
async function warmQueue(cluster: LocalCluster, n: number, log: (l: string) => void): Promise<void> {
  const sqs = sqsClient(cluster.sqs);
  const pid = elasticMqPid(Number(new URL(cluster.sqs.endpoint).port));
  const [cpu, t] = [pid === undefined ? 0 : (cpuSeconds(pid) ?? 0), now()];
  const queues = await ensureQueues(sqs, queueDefinitions("coldscale-warmup"));
  try {
    await stream(sqs, queues.fifo, n, { body: "x".repeat(1500), tag: "warm", window: 200 });
  } finally {
    for (const url of [queues.fifo, queues.fifoDlq]) await sqs.send(new DeleteQueueCommand({ QueueUrl: url })).catch(() => undefined);
    sqs.destroy();
  }
  const used = pid === undefined ? undefined : (cpuSeconds(pid) ?? 0) - cpu;
  log(
    `ElasticMQ warmed with ${n} messages in ${((now() - t) / 1000).toFixed(0)} s${used === undefined ? "" : ` (${((used * 1000) / n).toFixed(2)} ms of its CPU each)`}`,
  );
}

/** Events recorded in the cluster by the time all are Ready, by "type reason (namespace)", with one message each. */
async function eventsIn(cluster: LocalCluster): Promise<Record<string, { count: number; example: string }>> {
  const api = createKubeApi({ connection: cluster.kubeConfig });
  const events = await api.list({ group: "", version: "v1", plural: "events" });
  const by: Record<string, { count: number; example: string }> = {};
  for (const e of events as Array<{ type?: string; reason?: string; message?: string; count?: number; metadata: { namespace?: string } }>) {
    const key = `${e.type ?? ""} ${e.reason ?? ""} (${e.metadata.namespace ?? ""})`;
    const seen = by[key] ?? { count: 0, example: (e.message ?? "").slice(0, 300) };
    seen.count += e.count ?? 1;
    by[key] = seen;
  }
  return by;
}

/** The crdfn child's reconciles and its poller's queue requests by command, so far. */
async function childCounts(url: string): Promise<{ reconciles: number; queueRequests: Record<string, number> }> {
  const counts = (await (await fetch(url)).json()) as { reconciles: number; queueRequests: Record<string, number> };
  return { reconciles: counts.reconciles, queueRequests: counts.queueRequests };
}
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const r2 = (x: number): number => Math.round(x * 100) / 100;

interface Options {
  objects: number[];
  systems: SystemName[];
  profile: boolean;
  profileApiServer: boolean;
  receiveLoops?: number;
  baseline?: string;
  variant?: Record<string, string>;
  timeout: number;
  json?: string;
  /** Cluster side on CPU 0, the off-cluster side (ElasticMQ, poller and functions, this driver) on CPU 1. */
  split: boolean;
  /** Messages streamed through ElasticMQ before the first run (0: none). */
  warmQueue: number;
  /** ElasticMQ without its H2 message store (emulator/types.ts's QueueStorage). */
  queueInMemory?: boolean;
}

/** A crdfn run with settings of its own, or from another checkout: the same run's "before" of a product change. */
interface Variant {
  name: string;
  env: Record<string, string>;
  /** The checkout it runs from (--baseline); default this one. */
  root?: string;
}

export interface ColdRun {
  system: SystemName;
  /** crdfn with other settings (--receive-loops) or from another checkout (--baseline), else absent. */
  variant?: string;
  objects: number;
  namespace: string;
  startedAt: string;
  loadAvgStart: number[];
  loadAvgEnd: number[];
  createSeconds: number;
  /** Spawn to ready as the system reports it (crdfn: the bridge's initial sync; controller-runtime: informers synced). */
  startSeconds: number;
  /** Spawn to the first Greeting Ready, to half, to 90 %, to all. */
  firstReadySeconds: number;
  halfReadySeconds: number;
  ninetyReadySeconds: number;
  allReadySeconds: number;
  /** crdfn: spawn to every object's event accepted by the queue (the bridge's counter). */
  allPublishedSeconds: number | null;
  /** [seconds since spawn, Ready count], every 5 s. */
  readyCurve: Array<[number, number]>;
  cpuSeconds: Record<string, number>;
  cpuMsPerObject: Record<string, number>;
  machineBusyPercent: number;
  /** Each core's busy % over the run (cpu0, cpu1, …): with --split, cpu0 is the cluster's. */
  coreBusyPercent?: number[];
  /** Each core's busy % over each 5 s, as [seconds, cpu0 %, cpu1 %, …]. */
  coreCurve?: number[][];
  peakRssMiB: Record<string, number>;
  /** The API server's requests between spawn and all Ready, by "VERB resource", and per object. */
  requests: RequestCounts;
  requestsPerObject: RequestCounts;
  /** crdfn: events its bridge published by type (ADDED, MODIFIED, RESYNC), reconciles its functions ran, and its poller's queue requests by command, at all Ready. */
  published?: Record<string, number>;
  /** crdfn: the bridge's send requests (SendMessageBatch, or publish calls) by all Ready. */
  sendRequests?: number;
  reconciles?: number;
  queueRequests?: Record<string, number>;
  /** Events recorded in the cluster by all Ready (a failed reconcile records a Warning), by type, reason and namespace. */
  events?: Record<string, { count: number; example: string }>;
  /** crdfn with --profile: top self time per process (`bridge`, `functions`), by function and by area. */
  profiles?: Record<string, ProfileSummary>;
  /** With --profile-api-server: the API server's CPU profile from spawn to all Ready, ms per object by category (REQUEST_CATEGORIES). */
  apiServerProfile?: CategoryProfile;
}

export interface CategoryProfile {
  file: string;
  /** All the API server's CPU sampled, ms per object (a few seconds past all Ready are in it). */
  sampledMsPerObject: number;
  msPerObject: Record<string, number>;
}

/** A profile's seconds by category as ms per object. */
export function categoryProfile(file: string, totalSeconds: number, seconds: Record<string, number>, objects: number): CategoryProfile {
  const per = (x: number) => r2((x * 1000) / objects);
  return {
    file,
    sampledMsPerObject: per(totalSeconds),
    msPerObject: Object.fromEntries(Object.entries(seconds).map(([k, v]) => [k, per(v)])),
  };
}

/** crdfn's API-server CPU per object by category against controller-runtime(8)'s, where both were profiled. */
export function categoryComparison(n: number, crdfn: CategoryProfile, cr: CategoryProfile): string {
  const each = [...REQUEST_CATEGORIES.map(([k]) => k), "other"].map((k) => {
    const [a, b] = [crdfn.msPerObject[k] ?? 0, cr.msPerObject[k] ?? 0];
    return `${k} ${a} against ${b} (${a >= b ? "+" : ""}${r2(a - b)})`;
  });
  return `N = ${n}: API server ms per object, crdfn against controller-runtime(8), profiled: all ${crdfn.sampledMsPerObject} against ${cr.sampledMsPerObject}; ${each.join(", ")}`;
}

/** Creates N Greetings in a fresh namespace, 64 requests in flight, as bench:bridge creates its objects. */
async function createGreetings(cluster: LocalCluster, namespace: string, n: number, log: (l: string) => void): Promise<number> {
  const greetings = new Greetings(createKubeApi({ connection: cluster.kubeConfig }), namespace);
  await greetings.createNamespace();
  const t0 = now();
  let done = 0;
  const progress = setInterval(() => log(`  created ${done}/${n} (${Math.round(done / ((now() - t0) / 1000))}/s)`), 30_000);
  try {
    await forEachBounded(n, CREATE_CONCURRENCY, async (i) => {
      await greetings.create(objectName(i), `hello ${i}`);
      done++;
    });
  } finally {
    clearInterval(progress);
  }
  return (now() - t0) / 1000;
}

async function runOne(
  system: SystemName,
  variant: Variant | undefined,
  objects: number,
  cluster: LocalCluster,
  controllerRuntime: string,
  reaper: Reaper,
  o: Options,
  log: (l: string) => void,
): Promise<ColdRun> {
  const label = variant === undefined ? system : `${system} (${variant.name})`;
  const namespace = `cold-${label.replace(/[^a-z0-9]+/g, "-").replace(/-$/, "")}-${objects}`;
  log(`${label}, ${objects}: creating the Greetings in ${namespace} before it runs…`);
  const createSeconds = await createGreetings(cluster, namespace, objects, log);
  log(`  created in ${createSeconds.toFixed(1)} s`);
  if (system === "crdfn") {
    const left = await purgeQueues(cluster);
    if (left > 0) log(`  purged ${left} messages an earlier run's bridge sent as it stopped`);
  }
  const watch = new StatusWatch(cluster.kubeConfig, namespace, now);
  await watch.start();
  const profileDir = o.profile && system === "crdfn" ? mkdtempSync(join(tmpdir(), "crdfn-coldscale-prof-")) : undefined;
  const control = clusterPids(Number(new URL(cluster.server).port));
  if (o.split) splitBeforeStart(control);
  const base = { apiServer: control.apiServer ?? 0, etcd: control.etcd ?? 0, ...(system === "crdfn" ? { elasticMq: control.elasticMq ?? 0 } : {}) };
  const cpuBefore = Object.fromEntries(Object.entries(base).map(([k, pid]) => [k, cpuSeconds(pid) ?? 0]));
  const requestsBefore = await scrapeRequestCounts(cluster.kubeConfig);
  const machineBefore = machineTicks();
  const coresBefore = coreTicks();
  const startedAt = new Date().toISOString();
  const loadAvgStart = loadavg();
  log(`${label}, ${objects}: starting it (load ${loadAvgStart.map((l) => l.toFixed(2)).join(" ")})…`);

  const pids: Record<string, number> = { ...base };
  const peak: Record<string, number> = {};
  const samplePeaks = () => {
    for (const [k, pid] of Object.entries(pids)) peak[k] = Math.max(peak[k] ?? 0, rssBytes(pid) ?? 0);
  };
  let apiProfiling: ApiServerProfiling | undefined = o.profileApiServer
    ? startApiServerProfile(
        cluster,
        join(packageRoot, "bench-results", `coldscale-api-server-${label.replace(/[^a-z0-9]+/g, "-")}-${objects}-${startedAt.replace(/[:.]/g, "-")}.pb.gz`),
        10,
      )
    : undefined;
  const t0 = now();
  const since = () => (now() - t0) / 1000;
  const curve: Array<[number, number]> = [];
  const coreCurve: number[][] = [];
  let coresLast = coresBefore;
  const marks = { first: 0, half: 0, ninety: 0 };
  let allPublished: number | null = null;
  let metricsUrl: string | undefined;
  // Counted while the system starts too: crdfn's functions reconcile before its bridge is synced.
  const ready = () => watch.countAtLeast(1);
  const note = () => {
    const n = ready();
    const s = since();
    if (n >= 1 && !marks.first) marks.first = s;
    if (n >= objects / 2 && !marks.half) marks.half = s;
    if (n >= objects * 0.9 && !marks.ninety) marks.ninety = s;
  };
  const poll = setInterval(note, 50);
  const every5s = setInterval(() => {
    samplePeaks();
    curve.push([Math.round(since()), ready()]);
    const cores = coreTicks();
    coreCurve.push([Math.round(since()), ...cores.map((c, i) => busyPercent(coresLast[i] ?? c, c))]);
    coresLast = cores;
    log(`  ${Math.round(since())} s: ${ready()}/${objects} Ready (load ${loadavg()[0]?.toFixed(2)})`);
  }, 5000);
  // Once a second, to the second: each scrape renders every metric of the bridge, CPU the bridge's
  // figure counts (every 250 ms it was 3.5 % of the bridge's profile in a 10k cold start).
  const published = setInterval(() => {
    if (metricsUrl === undefined || allPublished !== null) return;
    void publishedCount(metricsUrl)
      .then((n) => {
        if (n >= objects && allPublished === null) allPublished = since();
      })
      .catch(() => undefined);
  }, 1000);
  let running: Awaited<ReturnType<typeof startSystem>> | undefined;
  try {
    running = await startSystem(system, namespace, cluster, { controllerRuntime, kopfPython: "" }, reaper, {
      readyTimeoutSeconds: o.timeout,
      ...(profileDir === undefined ? {} : { cpuProfileDir: profileDir }),
      ...(variant === undefined ? {} : { env: variant.env }),
      ...(variant?.root === undefined ? {} : { root: variant.root }),
    });
    Object.assign(pids, running.clusterSide, running.offCluster);
    if (o.split) splitAfterStart(Object.values(running.offCluster));
    metricsUrl = running.bridgeMetricsUrl;
    const startSeconds = since();
    log(`  ready as it reports it after ${startSeconds.toFixed(1)} s; ${ready()} Ready so far`);
    let checked = since();
    while (ready() < objects) {
      if (since() > o.timeout) throw new Error(`${system}: only ${ready()} of ${objects} Greetings Ready after ${o.timeout} s (log: ${running.logFile})`);
      // A process of the system that died (a bridge out of heap) stops the run now, not at the timeout.
      if (since() - checked > 1) {
        checked = since();
        const dead = Object.entries(pids).find(([, pid]) => Number.isInteger(pid) && pid > 0 && cpuSeconds(pid) === undefined);
        if (dead !== undefined)
          throw new Error(`${system}: its ${dead[0]} (pid ${dead[1]}) exited with ${ready()} of ${objects} Greetings Ready (log: ${running.logFile})`);
      }
      await sleep(20);
    }
    note();
    const allReadySeconds = since();
    // Everything is counted at the moment the last object is Ready, before anything stops.
    samplePeaks();
    const machine = machineTicks();
    const cores = coreTicks();
    const requests = requestDelta(requestsBefore, await scrapeRequestCounts(cluster.kubeConfig));
    const bridgeMetrics = metricsUrl === undefined ? undefined : await (await fetch(metricsUrl)).text().catch(() => undefined);
    const published = bridgeMetrics === undefined ? undefined : counterBy(bridgeMetrics, PUBLISHED, "type");
    const sendRequests = bridgeMetrics === undefined ? undefined : Object.values(counterBy(bridgeMetrics, SEND_REQUESTS, "")).reduce((a, b) => a + b, 0);
    const counts = running.queueRequestsUrl === undefined ? undefined : await childCounts(running.queueRequestsUrl).catch(() => undefined);
    const events = await eventsIn(cluster).catch((e: unknown) => (log(`  Events not read: ${(e as Error).message}`), undefined));
    const cpu: Record<string, number> = {};
    for (const [k, pid] of Object.entries(pids)) cpu[k] = r2((cpuSeconds(pid) ?? 0) - (cpuBefore[k] ?? 0));
    if (allPublished === null && metricsUrl !== undefined) {
      if ((await publishedCount(metricsUrl)) >= objects) allPublished = since();
    }
    log(`  all ${objects} Ready after ${allReadySeconds.toFixed(1)} s`);
    const run: ColdRun = {
      system,
      ...(variant === undefined ? {} : { variant: variant.name }),
      objects,
      namespace,
      startedAt,
      loadAvgStart,
      loadAvgEnd: loadavg(),
      createSeconds: r2(createSeconds),
      startSeconds: r2(startSeconds),
      firstReadySeconds: r2(marks.first),
      halfReadySeconds: r2(marks.half),
      ninetyReadySeconds: r2(marks.ninety),
      allReadySeconds: r2(allReadySeconds),
      allPublishedSeconds: allPublished === null ? null : r2(allPublished),
      readyCurve: curve,
      cpuSeconds: cpu,
      cpuMsPerObject: Object.fromEntries(Object.entries(cpu).map(([k, s]) => [k, r2((s * 1000) / objects)])),
      machineBusyPercent: busyPercent(machineBefore, machine),
      coreBusyPercent: cores.map((c, i) => busyPercent(coresBefore[i] ?? c, c)),
      coreCurve,
      peakRssMiB: Object.fromEntries(Object.entries(peak).map(([k, b]) => [k, Math.round(b / 1048576)])),
      requests,
      requestsPerObject: Object.fromEntries(Object.entries(requests).map(([k, n]) => [k, r2(n / objects)])),
      ...(published === undefined ? {} : { published }),
      ...(sendRequests === undefined ? {} : { sendRequests }),
      ...(counts === undefined ? {} : counts),
      ...(events === undefined ? {} : { events }),
    };
    if (apiProfiling !== undefined) {
      const { summary, parts } = await apiProfiling.stopByCategory(REQUEST_CATEGORIES);
      apiProfiling = undefined;
      if (summary === undefined) log(`  the API server's profile is not summarised (no go on PATH): ${parts.join(", ")}`);
      else run.apiServerProfile = categoryProfile(summary.file, summary.totalSeconds, summary.seconds, objects);
    }
    await running.stop();
    running = undefined;
    if (profileDir !== undefined) run.profiles = crdfnProfiles(profileDir, log);
    return run;
  } finally {
    clearInterval(poll);
    clearInterval(every5s);
    clearInterval(published);
    await apiProfiling?.abandon();
    await running?.stop();
    watch.stop();
    // crdfn as deployed admits Greetings only where it serves, and fences its function's writes
    // everywhere; the next run's namespace is another, and its system pays neither.
    if (system === "crdfn") await deletePolicies(cluster, crdfnPolicies(greeting, namespace));
  }
}

/** Each core's busy % over the run, then by quarter of it: where a core saturated as the run went on. */
function coreQuarters(r: ColdRun): string {
  const whole = (r.coreBusyPercent ?? []).map((p, i) => `cpu${i} ${p} %`).join(", ");
  const curve = r.coreCurve ?? [];
  if (curve.length < 4) return whole;
  const quarters = [0, 1, 2, 3].map((q) => {
    const part = curve.slice(Math.floor((q * curve.length) / 4), Math.floor(((q + 1) * curve.length) / 4));
    const cores = (part[0]?.length ?? 1) - 1;
    const means = Array.from({ length: cores }, (_, i) => part.reduce((sum, row) => sum + (row[i + 1] ?? 0), 0) / part.length);
    return means.map((m) => m.toFixed(0)).join("/");
  });
  return `${whole}; by quarter of the run (cpu0/cpu1/… %) ${quarters.join(", ")}`;
}

const pct = (x: number, of: number): string => (of > 0 ? `${((x / of) * 100).toFixed(0)} %` : "–");

/** The table docs/performance.md shows, then per run what limits it. */
export function formatColdReport(runs: readonly ColdRun[]): string {
  const out: string[] = [];
  const load = (r: ColdRun) => `${r.loadAvgStart[0]?.toFixed(1)} → ${r.loadAvgEnd[0]?.toFixed(1)}`;
  out.push("| N | system | all Ready s | first / half / 90 % s | start s | all published s | load avg (1 min) start → end | machine busy |");
  out.push("|---|---|---|---|---|---|---|---|");
  const name = (r: ColdRun) => (r.variant === undefined ? r.system : `${r.system} (${r.variant})`);
  for (const r of runs)
    out.push(
      `| ${r.objects} | ${name(r)} | ${r.allReadySeconds} | ${r.firstReadySeconds} / ${r.halfReadySeconds} / ${r.ninetyReadySeconds} | ${r.startSeconds} | ${r.allPublishedSeconds ?? "–"} | ${load(r)} | ${r.machineBusyPercent} % |`,
    );
  const sizes = [...new Set(runs.map((r) => r.objects))];
  out.push("");
  for (const n of sizes) {
    const c = runs.find((r) => r.objects === n && r.system === "crdfn" && r.variant === undefined);
    const cr = runs.find((r) => r.objects === n && r.system === "controller-runtime(8)");
    if (c && cr) out.push(`N = ${n}: crdfn ÷ controller-runtime(8) = ${(c.allReadySeconds / cr.allReadySeconds).toFixed(2)}`);
    if (c?.apiServerProfile && cr?.apiServerProfile) out.push(categoryComparison(n, c.apiServerProfile, cr.apiServerProfile));
    for (const v of runs.filter((r) => r.objects === n && r.system === "crdfn" && r.variant !== undefined)) {
      if (c) out.push(`N = ${n}: crdfn (${v.variant}) ÷ crdfn = ${(v.allReadySeconds / c.allReadySeconds).toFixed(2)}`);
    }
  }
  for (const r of runs) {
    out.push("", `${name(r)}, N = ${r.objects}: CPU ms per object ${JSON.stringify(r.cpuMsPerObject)}, peak RSS MiB ${JSON.stringify(r.peakRssMiB)}`);
    if (r.coreBusyPercent !== undefined) out.push(`  cores busy: ${coreQuarters(r)}`);
    if (r.apiServerProfile !== undefined)
      out.push(
        `  API server profile (${r.apiServerProfile.file}): ${r.apiServerProfile.sampledMsPerObject} ms per object sampled; ${Object.entries(
          r.apiServerProfile.msPerObject,
        )
          .map(([k, v]) => `${k} ${v}`)
          .join(", ")}`,
      );
    const reqs = Object.entries(r.requestsPerObject)
      .filter(([, v]) => v >= 0.01)
      .sort((a, b) => b[1] - a[1]);
    out.push(`  API requests per object: ${reqs.map(([k, v]) => `${k} ${v}`).join(", ")}`);
    if (r.events !== undefined && Object.keys(r.events).length > 0) out.push(`  Events: ${JSON.stringify(r.events)}`);
    if (r.published !== undefined)
      out.push(
        `  events published: ${JSON.stringify(r.published)} in ${r.sendRequests ?? "–"} send requests; reconciles ${r.reconciles ?? "–"}; queue requests ${JSON.stringify(r.queueRequests ?? {})}`,
      );
    for (const [part, p] of Object.entries(r.profiles ?? {})) {
      out.push(`  ${part} profile (${(p.totalMs / 1000).toFixed(1)} s sampled; ${p.file}):`);
      out.push(
        `    by area: ${p.byArea
          .slice(0, 6)
          .map((s) => `${s.name} ${pct(s.ms, p.totalMs)}`)
          .join(", ")}`,
      );
      for (const s of p.byFunction.slice(0, 10)) out.push(`    ${String(s.percent).padStart(5)} %  ${s.name}`);
    }
  }
  return out.join("\n");
}

async function coldScale(o: Options, log: (l: string) => void): Promise<{ path: string; report: string }> {
  const missing = missingToolchains().filter((m) => m.startsWith("go"));
  if (o.systems.some((s) => s.startsWith("controller-runtime")) && missing.length) throw new Error(`controller-runtime needs ${missing.join("")}`);
  if (o.systems.some((s) => s.startsWith("kopf"))) throw new Error("bench:coldscale runs crdfn and controller-runtime; kopf is in bench:peers");
  const startedAt = new Date().toISOString();
  const controllerRuntime = o.systems.some((s) => s.startsWith("controller-runtime")) ? buildControllerRuntime(log).path : "";
  log("starting the embedded cluster…");
  const cluster = await startCluster({ log: () => {}, queueStorage: o.queueInMemory ? "memory" : "disk" });
  const reaper = startReaper();
  const runs: ColdRun[] = [];
  let left: string | undefined;
  /**
   * One run, after the last one's namespace is gone (its objects would weigh on this run's etcd).
   * The last run's goes with the cluster: deleting 200k objects took longer than 10 minutes.
   */
  const measured = async (system: SystemName, variant: Variant | undefined, n: number): Promise<void> => {
    // A run measured stays measured: a namespace slow to go is said, not thrown over the results.
    if (left !== undefined)
      await removeNamespace(cluster, left, log).catch((e: unknown) => log(`  ${(e as Error).message}; this run shares the cluster with its objects`));
    const run = await runOne(system, variant, n, cluster, controllerRuntime, reaper, o, log);
    left = run.namespace;
    runs.push(run);
  };
  try {
    await installCrds(cluster.kubeConfig, [greeting] as ReadonlyArray<Operator<unknown>>);
    if (o.systems.includes("crdfn") && o.warmQueue > 0) await warmQueue(cluster, o.warmQueue, log);
    for (const [i, n] of o.objects.entries()) {
      // Each size starts with the next system, so neither always runs on the emptier etcd.
      const order = o.systems.map((_, k) => o.systems[(k + i) % o.systems.length] as SystemName);
      for (const system of order) {
        // The baseline first, on the emptier etcd: a change measured after it is not flattered.
        if (system === "crdfn" && o.baseline !== undefined) {
          const baseline: Variant = { name: `baseline ${basename(o.baseline)}`, env: {}, root: o.baseline };
          await measured(system, baseline, n);
        }
        if (system === "crdfn" && o.variant !== undefined) {
          const settings: Variant = {
            name: Object.entries(o.variant)
              .map(([k, v]) => `${k}=${v}`)
              .join(" "),
            env: o.variant,
          };
          await measured(system, settings, n);
        }
        await measured(system, undefined, n);
        if (system === "crdfn" && o.receiveLoops !== undefined) {
          const loops: Variant = { name: `${o.receiveLoops} receive loops`, env: { [RECEIVE_LOOPS_ENV]: String(o.receiveLoops) } };
          await measured(system, loops, n);
        }
      }
    }
  } finally {
    await reaper.release();
    await cluster.stop();
  }
  const path = o.json ?? join(packageRoot, "bench-results", `coldscale-${startedAt.replace(/[:.]/g, "-")}.json`);
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(
    path,
    `${JSON.stringify({ startedAt, finishedAt: new Date().toISOString(), machine: { cpus: cpus().length, node: process.version }, options: o, runs }, null, 2)}\n`,
  );
  return { path, report: formatColdReport(runs) };
}

const sizeList = (text: string): number[] => {
  const sizes = text.split(",").map((s) => Number(s.trim()));
  if (sizes.some((n) => !Number.isInteger(n) || n < 1)) throw new InvalidArgumentError("--objects must be whole numbers ≥ 1, comma-separated");
  return sizes;
};

const systemList = (text: string): SystemName[] => {
  const names = text.split(",").map((s) => s.trim());
  const known = SYSTEMS.filter((s) => !s.startsWith("kopf")) as readonly string[];
  const unknown = names.filter((n) => !known.includes(n));
  if (unknown.length) throw new InvalidArgumentError(`unknown system ${unknown.join(", ")} (known here: ${known.join(", ")})`);
  return names as SystemName[];
};

function coldScaleCommand(): Command {
  return new Command("npm run bench:coldscale --")
    .description(
      "A cold start at scale: N Greetings created before any operator runs, then each system started for them and timed to all Ready " +
        "(crdfn as the local stack runs it, controller-runtime with 8 workers), with CPU per process, the API server's requests by verb, and CPU profiles of crdfn's bridge and function process",
    )
    .addOption(new Option("--objects <list>", "comma-separated N (each a fresh namespace per system)").argParser(sizeList).default([10_000, 100_000]))
    .addOption(
      new Option("--systems <list>", "comma-separated (crdfn, controller-runtime(1), controller-runtime(8))")
        .argParser(systemList)
        .default(["crdfn", "controller-runtime(8)"]),
    )
    .option("--no-profile", "no CPU profiles of crdfn's bridge and function process")
    .option(
      "--profile-api-server",
      "also profile the API server's CPU (Go's pprof) from each system's spawn to all Ready, and compare where it goes by category: the policy, each handler, the watches, GC (needs go on PATH for the summary)",
      false,
    )
    .option("--receive-loops <n>", `also run crdfn with this many receive loops in its poller (default ${DEFAULT_RECEIVE_LOOPS}), in the same run`, (t) => {
      const n = Number(t);
      if (!Number.isInteger(n) || n < 1 || n > 64) throw new InvalidArgumentError("--receive-loops must be a whole number from 1 to 64");
      return n;
    })
    .option(
      "--baseline <dir>",
      "also run crdfn from another checkout of it, before this one, in the same run (e.g. `git archive <commit> | tar -x -C <dir>` with node_modules linked): a change's before and after under the same load",
      (dir) => {
        const root = resolve(dir);
        if (!existsSync(join(root, "bench", "peers", "crdfn-child.ts")))
          throw new InvalidArgumentError(`--baseline ${dir}: not a crdfn checkout (no bench/peers/crdfn-child.ts)`);
        if (!existsSync(join(root, "node_modules"))) throw new InvalidArgumentError(`--baseline ${dir}: has no node_modules (link this checkout's)`);
        return root;
      },
    )
    .option(
      "--variant <settings>",
      "also run crdfn with these settings (KEY=VALUE,…: environment variables of its bridge and functions), before it, in the same run",
      (text) => {
        // Split at each pair's first "=": a value may hold more (V8 flags: --max-semi-space-size=8).
        const pairs = text.split(",").map((p) => {
          const at = p.indexOf("=");
          return at < 0 ? [p.trim()] : [p.slice(0, at).trim(), p.slice(at + 1).trim()];
        });
        if (pairs.some((p) => p.length !== 2 || !/^[A-Z][A-Z0-9_]*$/.test(p[0] ?? "")))
          throw new InvalidArgumentError("--variant must be KEY=VALUE pairs, comma-separated");
        return Object.fromEntries(pairs) as Record<string, string>;
      },
    )
    .option(
      "--timeout <seconds>",
      "give up on a run not all Ready by then (also the systems' own start timeout)",
      (t) => {
        const n = Number(t);
        if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError("--timeout must be a whole number of seconds ≥ 1");
        return n;
      },
      3600,
    )
    .option(
      "--split",
      "run the cluster side (etcd, kube-apiserver, kube-controller-manager, the bridge or operator) on CPU 0 and what production runs off the cluster (ElasticMQ, the poller and functions, this driver) on CPU 1, for every system",
      false,
    )
    .option(
      "--warm-queue <n>",
      "messages to stream through ElasticMQ before the first run, so that its JVM has compiled what every crdfn run uses (0: none)",
      (t) => {
        const n = Number(t);
        if (!Number.isInteger(n) || n < 0) throw new InvalidArgumentError("--warm-queue must be a whole number ≥ 0");
        return n;
      },
      20_000,
    )
    .option("--queue-in-memory", QUEUE_IN_MEMORY_HELP)
    .option("--json <path>", "where to write the results (default bench-results/coldscale-<timestamp>.json)")
    .addHelpText(
      "after",
      "\nExample (10k only, both systems, about 10 minutes on 2 cores):\n  npm run bench:coldscale -- --objects 10000 --systems crdfn,controller-runtime(8)" +
        "\nThe bridge with other V8 heap sizes first, then as shipped:\n  npm run bench:coldscale -- --objects 10000 --systems crdfn --split --variant CRDFN_PEERS_BRIDGE_NODE_OPTIONS=--max-semi-space-size=8",
    )
    .action(async (o: Options, command: Command) => {
      const refusal = o.split ? splitRefusal() : undefined;
      if (refusal !== undefined) command.error(refusal);
      const { path, report } = await coldScale(o, (line) => console.error(line));
      console.log(report);
      console.log(`\nresults: ${path}`);
    });
}

if (import.meta.main) await runBench("bench:coldscale", coldScaleCommand());
