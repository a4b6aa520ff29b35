// `npm run bench`: the whole local pipeline under load — real API server and etcd, the bridge as
// its own process, the example operators' functions, and the queue of a target: ElasticMQ and the
// local poller (AWS's), or the Pub/Sub emulator, the push deliverer and functions-framework (Cloud
// Run's: bench-target.ts) — measured from a spec write to the status that reports it, next to the
// raw ceiling of the same API server (a tight loop of status patches). The Cloud Run target runs
// the setup and rated phases only: what a change costs is measured at a steady rate.
import { cpus, loadavg } from "node:os";
import { pino } from "pino";
import type { FunctionTarget } from "../cli/local/dev-target.ts";
import { DEFAULT_RECEIVE_LOOPS, startPipeline, type ReconcileRecord } from "../cli/local/pipeline.ts";
import { BRIDGE_NODE_OPTIONS } from "../deploy/bridge.ts";
import type { Operator } from "../core/operator.ts";
import type { PushRecord } from "../emulator/pubsub-push.ts";
import cronTab from "../examples/crontab/operator.ts";
import greeting from "../examples/greeting/operator.ts";
import { createKubeApi } from "../functions/runtime/kube-api-http.ts";
import { startBenchTarget } from "./bench-target.ts";
import { atRate, changeTimer, forEachBounded, inFlight, measureRawCeiling } from "./drive.ts";
import { Greetings, objectName } from "./greetings.ts";
import { clusterPids } from "./proc.ts";
import { summarizePushes, type PushSummary } from "./pushes.ts";
import { ResourceSampler, type BridgeMemory, type Mark, type PhaseCpu } from "./resources.ts";
import { summarizeCounts, summarizeLatency, type CountSummary, type LatencySummary } from "./stats.ts";
import { StatusWatch } from "./status-watch.ts";

export interface BenchOptions {
  /** Where the functions run: the poller on ElasticMQ (default) or push from the Pub/Sub emulator. */
  target?: FunctionTarget;
  objects: number;
  /** Spec changes per second in the rated phase. */
  rate: number;
  /** Length of each measured phase. */
  durationSeconds: number;
  /** Changes in flight in the closed loop, status patches in flight for the raw ceiling, writers at full load. */
  concurrency: number;
  /** Concurrent receive loops of the local poller on the FIFO queue (default: the pipeline's; the Lambda target's only). */
  receiveLoops?: number;
  /** Progress lines for people. */
  log: (line: string) => void;
}

type Phase = "setup" | "rated" | "closed" | "raw" | "full";

interface ReconcileStats {
  reconciles: number;
  outcomes: Record<string, number>;
  apiCallsPerReconcile: CountSummary;
  /** Time inside the function: read, reconcile, writes. */
  handlerLatency: LatencySummary;
}

/** The phases under load (closed loop, raw ceiling, full load): the Lambda target's. */
export interface LoadPhases {
  closedLoop: ReconcileStats & {
    changes: number;
    writeErrors: number;
    unobserved: number;
    seconds: number;
    reconcilesPerSecond: number;
    latency: LatencySummary;
    cpu: PhaseCpu;
  };
  rawCeiling: { patches: number; errors: number; seconds: number; patchesPerSecond: number; latency: LatencySummary; cpu: PhaseCpu };
  fullLoad: ReconcileStats & { writes: number; writeErrors: number; writesPerSecond: number; seconds: number; reconcilesPerSecond: number; cpu: PhaseCpu };
  /** Full-load reconciles/s divided by raw status patches/s. */
  ratioToRaw: number;
  /** Closed-loop reconciles/s divided by raw status patches/s (no writers competing). */
  closedLoopRatioToRaw: number;
}

export interface BenchResult extends Partial<LoadPhases> {
  startedAt: string;
  finishedAt: string;
  machine: { cpus: number; node: string; loadAvgStart: number[]; loadAvgEnd: number[] };
  /** `receiveLoops`: the Lambda target's poller; the Cloud Run target's push deliverer runs as crdfn dev runs it. */
  params: { target: FunctionTarget; objects: number; rate: number; durationSeconds: number; concurrency: number; receiveLoops?: number };
  /** `drainSeconds`: from all Ready until the queues were empty (the children's announcements). */
  setup: ReconcileStats & { createSeconds: number; allReadySeconds: number; drainSeconds: number; cpu: PhaseCpu; pushes?: PushSummary };
  /** `pushes`: the Cloud Run target's push requests. */
  rated: ReconcileStats & {
    writes: number;
    writeErrors: number;
    offeredRatePerSecond: number;
    unobserved: number;
    latency: LatencySummary;
    cpu: PhaseCpu;
    pushes?: PushSummary;
  };
  /** The bridge process as its image runs it: the bundle, under the deployment's NODE_OPTIONS. */
  bridge: BridgeMemory & { nodeOptions: string };
}

const NAMESPACE = "crdfn-bench";
const OBSERVE_TIMEOUT_MS = 30_000;
const QUIET_TIMEOUT_MS = 180_000;
const now = (): number => performance.now();
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function reconcileStats(records: readonly Pick<ReconcileRecord, "outcome" | "latencyMs">[]): ReconcileStats {
  const outcomes: Record<string, number> = {};
  for (const r of records) outcomes[r.outcome.result] = (outcomes[r.outcome.result] ?? 0) + 1;
  return {
    reconciles: records.length,
    outcomes,
    apiCallsPerReconcile: summarizeCounts(records.map((r) => r.outcome.apiCalls)),
    handlerLatency: summarizeLatency(records.map((r) => r.latencyMs)),
  };
}

export async function runPipelineBench(o: BenchOptions): Promise<BenchResult> {
  const startedAt = new Date().toISOString();
  const loadAvgStart = loadavg();
  const records: Record<Phase, Pick<ReconcileRecord, "outcome" | "latencyMs">[]> = { setup: [], rated: [], closed: [], raw: [], full: [] };
  const pushes: Record<Phase, PushRecord[]> = { setup: [], rated: [], closed: [], raw: [], full: [] };
  let phase: Phase = "setup";
  const targetName = o.target ?? "lambda";

  o.log(`starting the local cluster and the ${targetName} target's queue…`);
  const target = await startBenchTarget(targetName, (p) => pushes[phase].push(p));
  const { cluster } = target;
  const cleanup: Array<() => Promise<void> | void> = [() => target.stop()];
  try {
    const logger = pino({ level: "warn" }, pino.destination(2));
    const pipeline = await startPipeline({
      cluster,
      ...target.pipeline,
      operators: [greeting, cronTab] as ReadonlyArray<Operator<unknown>>,
      logger,
      bridgeProcess: true,
      identities: { namespaces: [NAMESPACE] },
      receiveLoops: o.receiveLoops ?? DEFAULT_RECEIVE_LOOPS,
      onReconcile: (r) => {
        if (r.kind === "Greeting") records[phase].push({ outcome: r.outcome, latencyMs: r.latencyMs });
      },
    });
    cleanup.unshift(() => pipeline.stop());
    const servers = { ...clusterPids(Number(new URL(cluster.server).port)), ...target.queueServer };
    const metricsUrl = `http://127.0.0.1:${pipeline.bridgeProcess.httpPort}/metrics`;
    const sampler = new ResourceSampler(pipeline.bridgeProcess.pid, metricsUrl, servers, () => target.requests(), target.bridgeSends);
    sampler.start();
    cleanup.unshift(() => sampler.stop());

    const quiet = () => target.quiet(metricsUrl, QUIET_TIMEOUT_MS);
    /** The Cloud Run target's pushes and the bridge's publishes from a phase's mark until the queue is at rest (the phase's tail included). */
    const pushSummary = async (p: Phase, since: Mark) => {
      if (targetName !== "cloudrun") return {};
      const c = await sampler.since(since);
      return { pushes: summarizePushes(pushes[p], { publishCalls: c.queueRequests[target.bridgeSends] ?? 0, messages: c.bridgeMessages }) };
    };
    const greetings = new Greetings(createKubeApi({ connection: cluster.kubeConfig }), NAMESPACE);
    await greetings.createNamespace();
    const watch = new StatusWatch(cluster.kubeConfig, NAMESPACE, now);
    await watch.start();
    cleanup.unshift(() => watch.stop());
    const names = Array.from({ length: o.objects }, (_, i) => objectName(i));
    const generations = new Array<number>(o.objects).fill(0);

    // 1. Setup: N objects created, every one reconciled (first creation).
    o.log(`creating ${o.objects} Greetings…`);
    let mark = await sampler.mark();
    const t0 = now();
    await forEachBounded(o.objects, 16, async (i) => {
      generations[i] = await greetings.create(names[i] ?? "", `hello ${i}`);
    });
    const createSeconds = (now() - t0) / 1000;
    const readyDeadline = now() + 120_000 + o.objects * 200;
    while (watch.countAtLeast(1) < o.objects) {
      if (now() > readyDeadline) throw new Error(`only ${watch.countAtLeast(1)} of ${o.objects} Greetings became Ready`);
      await sleep(50);
    }
    const stale = names.filter((n, i) => watch.observed(n) !== generations[i]);
    if (stale.length) throw new Error(`${stale.length} Greetings report an observedGeneration other than their generation`);
    const allReadySeconds = (now() - t0) / 1000;
    o.log(`  all Ready in ${allReadySeconds.toFixed(1)} s`);
    const drainSeconds = await quiet();
    const setup = {
      createSeconds,
      allReadySeconds,
      drainSeconds,
      ...reconcileStats(records.setup),
      cpu: await sampler.since(mark),
      ...(await pushSummary("setup", mark)),
    };

    const change = changeTimer({ greetings, watch, names, now, timeoutMs: OBSERVE_TIMEOUT_MS });

    // 2. Rated: R changes per second spread over the N objects.
    o.log(`rated: ${o.rate} changes/s for ${o.durationSeconds} s…`);
    phase = "rated";
    mark = await sampler.mark();
    const ratedLatencies: number[] = [];
    const ratedCounts = { errors: 0, unobserved: 0 };
    const writes = await atRate(o.rate, o.durationSeconds * 1000, (k) => change(k % o.objects, `rated ${k}`, ratedLatencies, ratedCounts), now);
    const rated = {
      writes,
      writeErrors: ratedCounts.errors,
      offeredRatePerSecond: o.rate,
      unobserved: ratedCounts.unobserved,
      latency: summarizeLatency(ratedLatencies),
      ...reconcileStats(records.rated),
      cpu: await sampler.since(mark),
    };

    await quiet();
    const ratedPhase = { ...rated, ...(await pushSummary("rated", mark)) };
    const base = {
      startedAt,
      params: {
        target: targetName,
        objects: o.objects,
        rate: o.rate,
        durationSeconds: o.durationSeconds,
        concurrency: Math.min(o.concurrency, o.objects),
        ...(targetName === "lambda" ? { receiveLoops: o.receiveLoops ?? DEFAULT_RECEIVE_LOOPS } : {}),
      },
      setup,
      rated: ratedPhase,
    };
    const finish = (load: Partial<LoadPhases>): BenchResult => ({
      ...base,
      ...load,
      finishedAt: new Date().toISOString(),
      machine: { cpus: cpus().length, node: process.version, loadAvgStart, loadAvgEnd: loadavg() },
      bridge: { ...sampler.memory(), nodeOptions: BRIDGE_NODE_OPTIONS },
    });
    if (targetName === "cloudrun") return finish({});

    // 3. Closed loop: `concurrency` changes in flight, each on its own objects, a new one as
    //    soon as the last one's status is observed: latency and throughput when busy.
    const workers = Math.min(o.concurrency, o.objects);
    const owned = Array.from({ length: workers }, (_, w) => Array.from({ length: Math.ceil((o.objects - w) / workers) }, (_, j) => w + j * workers));
    const objectOf = (w: number, round: number): number => {
      const mine = owned[w] ?? [];
      return mine[round % mine.length] ?? 0;
    };
    o.log(`closed loop: ${workers} changes in flight for ${o.durationSeconds} s…`);
    phase = "closed";
    mark = await sampler.mark();
    const closedLatencies: number[] = [];
    const closedCounts = { errors: 0, unobserved: 0 };
    let t = now();
    await inFlight(workers, o.durationSeconds * 1000, (w, round) => change(objectOf(w, round), `closed ${round}`, closedLatencies, closedCounts), now);
    const closedSeconds = (now() - t) / 1000;
    const closedLoop = {
      changes: closedLatencies.length,
      writeErrors: closedCounts.errors,
      unobserved: closedCounts.unobserved,
      seconds: Math.round(closedSeconds * 100) / 100,
      reconcilesPerSecond: Math.round((closedLatencies.length / closedSeconds) * 10) / 10,
      latency: summarizeLatency(closedLatencies),
      ...reconcileStats(records.closed),
      cpu: await sampler.since(mark),
    };

    // The raw ceiling gets the API server to itself.
    await quiet();

    // 4. Raw ceiling: the same concurrency of status merge patches, nothing else.
    o.log(`raw ceiling: ${workers} status patches in flight for ${o.durationSeconds} s…`);
    phase = "raw";
    mark = await sampler.mark();
    const {
      latencies: rawLatencies,
      errors: rawErrors,
      seconds: rawSeconds,
    } = await measureRawCeiling(workers, o.durationSeconds * 1000, (w, round) => greetings.patchStatus(names[objectOf(w, round)] ?? "", round), now);
    const rawCeiling = {
      patches: rawLatencies.length,
      errors: rawErrors,
      seconds: Math.round(rawSeconds * 100) / 100,
      patchesPerSecond: Math.round((rawLatencies.length / rawSeconds) * 10) / 10,
      latency: summarizeLatency(rawLatencies),
      cpu: await sampler.since(mark),
    };

    // 5. Full load, last (it leaves a backlog): `concurrency` writers change specs as fast as
    //    the API server takes them; reconciles/s = status updates reporting a new generation.
    o.log(`full load: ${workers} writers for ${o.durationSeconds} s…`);
    phase = "full";
    mark = await sampler.mark();
    let fullWrites = 0;
    let fullErrors = 0;
    const advancesBefore = watch.advances;
    t = now();
    await inFlight(
      workers,
      o.durationSeconds * 1000,
      async (w, round) => {
        try {
          await greetings.setMessage(names[objectOf(w, round)] ?? "", `full ${round}`);
          fullWrites++;
        } catch {
          fullErrors++;
        }
      },
      now,
    );
    const fullSeconds = (now() - t) / 1000;
    const fullLoad = {
      writes: fullWrites,
      writeErrors: fullErrors,
      writesPerSecond: Math.round((fullWrites / fullSeconds) * 10) / 10,
      seconds: Math.round(fullSeconds * 100) / 100,
      reconcilesPerSecond: Math.round(((watch.advances - advancesBefore) / fullSeconds) * 10) / 10,
      ...reconcileStats(records.full),
      cpu: await sampler.since(mark),
    };

    return finish({
      closedLoop,
      rawCeiling,
      fullLoad,
      ratioToRaw: Math.round((fullLoad.reconcilesPerSecond / rawCeiling.patchesPerSecond) * 1000) / 1000,
      closedLoopRatioToRaw: Math.round((closedLoop.reconcilesPerSecond / rawCeiling.patchesPerSecond) * 1000) / 1000,
    });
  } finally {
    o.log("stopping…");
    for (const step of cleanup) await step();
  }
}
