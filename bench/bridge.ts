// `npm run bench:bridge`: the bridge's initial sync of 1k, 10k, 50k and 100k objects against a
// real API server and ElasticMQ — sync time, retained heap per object, peak heap and RSS, idle
// CPU — and publish throughput, next to a no-op controller-runtime operator (bench/peers) caching
// the same objects and the ConfigMaps it would own: its RSS, sync time and idle CPU. Run with
// --expose-gc (the npm script does) so retained heap is measured after a full collection.
// BENCH_SIZES=1000,10000 picks other sizes; BENCH_CREATE_BUDGET_S caps the time spent creating.
import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PurgeQueueCommand } from "@aws-sdk/client-sqs";
import { pino } from "pino";
import { Registry } from "prom-client";
import { startBridge } from "../bridge/bridge.ts";
import { bundleBridge } from "../cli/bundle.ts";
import { BRIDGE_NODE_OPTIONS } from "../deploy/bridge.ts";
import { startCluster } from "../emulator/cluster.ts";
import type { LocalCluster } from "../emulator/types.ts";
import { bridgeConfig, bridgeEnv, spawnBridge, sqsClientFor } from "../test/support/bridge-environment.ts";
import { createNamespace } from "../test/support/crontabs.ts";
import { kube, ok } from "../test/support/kube-requests.ts";
import { metricValue, scrapeMetrics } from "../test/support/metrics.ts";
import { parallel } from "../test/support/promises.ts";
import { buildControllerRuntime, missingToolchains } from "./peers/build.ts";
import { cpuSeconds, rssBytes } from "./proc.ts";
import { TEST_EVENT_KEY } from "../test/support/event-key.ts";

const NS = "bench";
const GROUP = "bench.crdfn.dev";
const CREATE_CONCURRENCY = 64;
/** Give up on a size whose objects would take longer than this to create. */
const CREATE_BUDGET_MS = Number(process.env.BENCH_CREATE_BUDGET_S ?? 1200) * 1000;
/**
 * How long each process is watched doing nothing after its sync, for its idle CPU. /proc counts
 * CPU in 10 ms ticks: over 10 s one tick was 0.1 % of a core, as much as the figures compared.
 */
const IDLE_MS = Number(process.env.BENCH_IDLE_S ?? 60) * 1000;

const gc = (globalThis as { gc?: () => void }).gc;
const mib = (bytes: number): number => bytes / 1024 / 1024;
const heapNow = (): number => {
  gc?.();
  gc?.();
  return process.memoryUsage().heapUsed;
};

async function installTinyCrd(cluster: LocalCluster): Promise<void> {
  await ok(
    kube(cluster.kubeConfig, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", {
      apiVersion: "apiextensions.k8s.io/v1",
      kind: "CustomResourceDefinition",
      metadata: { name: `tinies.${GROUP}` },
      spec: {
        group: GROUP,
        names: { plural: "tinies", singular: "tiny", kind: "Tiny" },
        scope: "Namespaced",
        versions: [
          {
            name: "v1",
            served: true,
            storage: true,
            schema: { openAPIV3Schema: { type: "object", properties: { spec: { type: "object", "x-kubernetes-preserve-unknown-fields": true } } } },
          },
        ],
      },
    }),
    "tiny CRD",
  );
  for (let i = 0; (await kube(cluster.kubeConfig, "GET", `/apis/${GROUP}/v1/tinies`)).status !== 200; i++) {
    if (i > 100) throw new Error("tiny CRD never served");
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function createTinies(cluster: LocalCluster, from: number, to: number): Promise<number> {
  const started = Date.now();
  const indexes = Array.from({ length: to - from }, (_, i) => from + i);
  await parallel(indexes, CREATE_CONCURRENCY, (i) =>
    ok(
      kube(cluster.kubeConfig, "POST", `/apis/${GROUP}/v1/namespaces/${NS}/tinies`, {
        apiVersion: `${GROUP}/v1`,
        kind: "Tiny",
        metadata: { name: `t-${i}` },
        spec: { n: i },
      }),
      `tiny ${i}`,
    ),
  );
  return Date.now() - started;
}

interface Row {
  objects: number;
  createS: number;
  /** In-process run: initial list handed over / everything accepted by the queue. */
  syncS: number;
  publishedS: number;
  eventsPerS: number;
  /** In-process run: heap the running bridge keeps, after a full GC. */
  retainedHeapMiB: number;
  heapPer10kMiB: number;
  /** Separate `node bridge/main.ts` process, as deployed: its own heap and RSS. */
  processSyncS: number;
  processPeakHeapMiB: number;
  processPeakRssMiB: number;
  /** Percent of one core over IDLE_MS after everything was published. */
  processIdleCpuPercent: number;
  /** The no-op controller-runtime operator: start to informers synced, peak VmRSS, idle CPU (null without Go). */
  crSyncS: number | null;
  crPeakRssMiB: number | null;
  crIdleCpuPercent: number | null;
}

/** As the generated Deployment sets it, so the benchmark measures what ships (BENCH_BRIDGE_NODE_OPTIONS: try others). */
const SHIPPED_NODE_OPTIONS = process.env.BENCH_BRIDGE_NODE_OPTIONS ?? BRIDGE_NODE_OPTIONS;

/** As in a pod: a ServiceAccount token and the server's CA, so client-node stays unloaded as it does there. */
const tinyEnv = (cluster: LocalCluster, tokenFile: string): Record<string, string> =>
  bridgeEnv(cluster, {
    CRDFN_RESOURCES: `${GROUP}/v1/tinies>v1/configmaps`,
    CRDFN_NAMESPACES: NS,
    NODE_OPTIONS: SHIPPED_NODE_OPTIONS,
    CRDFN_KUBE_SERVER: cluster.server,
    CRDFN_KUBE_CA_FILE: cluster.caPath,
    CRDFN_KUBE_TOKEN_FILE: tokenFile,
  });

/** A ServiceAccount for the bridge process and a token file for it (its RBAC is not what is measured here). */
async function bridgeToken(cluster: LocalCluster, dir: string): Promise<string> {
  await ok(kube(cluster.kubeConfig, "POST", `/api/v1/namespaces/${NS}/serviceaccounts`, { metadata: { name: "bench-bridge" } }), "bridge ServiceAccount");
  await ok(
    kube(cluster.kubeConfig, "POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", {
      metadata: { name: "bench-bridge" },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "cluster-admin" },
      subjects: [{ kind: "ServiceAccount", name: "bench-bridge", namespace: NS }],
    }),
    "bridge binding",
  );
  const answer = await ok(
    kube(cluster.kubeConfig, "POST", `/api/v1/namespaces/${NS}/serviceaccounts/bench-bridge/token`, { spec: { expirationSeconds: 24 * 3600 } }),
    "bridge token",
  );
  const file = join(dir, "token");
  writeFileSync(file, (answer.body as { status?: { token?: string } }).status?.token ?? "");
  return file;
}

async function purge(cluster: LocalCluster): Promise<void> {
  const sqs = sqsClientFor(cluster);
  await sqs.send(new PurgeQueueCommand({ QueueUrl: cluster.sqs.queues.fifo }));
  sqs.destroy();
}

/** The bridge in this process: sync time, publish throughput, and the heap it retains. */
async function measureInProcess(
  cluster: LocalCluster,
  objects: number,
): Promise<Pick<Row, "syncS" | "publishedS" | "eventsPerS" | "retainedHeapMiB" | "heapPer10kMiB">> {
  await purge(cluster);
  const sqs = sqsClientFor(cluster);
  const baseline = heapNow();
  const registry = new Registry();
  const started = performance.now();
  const bridge = startBridge(bridgeConfig(cluster, { CRDFN_RESOURCES: `${GROUP}/v1/tinies>v1/configmaps`, CRDFN_NAMESPACES: NS }), {
    eventKey: TEST_EVENT_KEY,
    kubeConfig: cluster.kubeConfig,
    sqs,
    logger: pino({ level: "warn" }),
    registry,
  });
  await bridge.ready;
  const synced = performance.now() - started;
  while ((await metricValue(registry, "crdfn_bridge_events_published_total")) < objects) await new Promise((r) => setTimeout(r, 20));
  const published = performance.now() - started;
  const retained = heapNow() - baseline;
  await bridge.stop(5000);
  sqs.destroy();
  return {
    syncS: synced / 1000,
    publishedS: published / 1000,
    eventsPerS: objects / (published / 1000),
    retainedHeapMiB: mib(retained),
    heapPer10kMiB: mib((retained / objects) * 10_000),
  };
}

/** The bridge as its own process: peak heap and RSS from its /metrics while it syncs and publishes. */
async function measureProcess(
  cluster: LocalCluster,
  objects: number,
  entry: string,
  tokenFile: string,
): Promise<Pick<Row, "processSyncS" | "processPeakHeapMiB" | "processPeakRssMiB" | "processIdleCpuPercent">> {
  await purge(cluster);
  const started = performance.now();
  const p = spawnBridge(tinyEnv(cluster, tokenFile), entry);
  try {
    const port = await p.port;
    let syncedAt = 0;
    void p.synced.then(() => (syncedAt = performance.now()));
    let peakHeap = 0;
    let peakRss = 0;
    for (;;) {
      const m = await scrapeMetrics(port);
      peakHeap = Math.max(peakHeap, m.get("nodejs_heap_size_used_bytes") ?? 0);
      peakRss = Math.max(peakRss, m.get("process_resident_memory_bytes") ?? 0);
      if (syncedAt > 0 && (m.get("crdfn_bridge_events_published_total") ?? 0) >= objects) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    const pid = p.child.pid ?? 0;
    const idleCpu = await idleCpuPercent(pid);
    peakRss = Math.max(peakRss, rssBytes(pid) ?? 0);
    return { processSyncS: (syncedAt - started) / 1000, processPeakHeapMiB: mib(peakHeap), processPeakRssMiB: mib(peakRss), processIdleCpuPercent: idleCpu };
  } finally {
    p.child.kill("SIGTERM");
    await p.exited;
  }
}

/** Percent of one core `pid` uses over IDLE_MS. */
async function idleCpuPercent(pid: number): Promise<number> {
  const before = cpuSeconds(pid) ?? 0;
  await new Promise((r) => setTimeout(r, IDLE_MS));
  return Math.round((((cpuSeconds(pid) ?? before) - before) / (IDLE_MS / 1000)) * 1000) / 10;
}

/**
 * The no-op controller-runtime operator (bench/peers/controller-runtime --mode=noop) over the
 * same namespace: its informers cache every Tiny (typed) and the ConfigMaps; start to synced,
 * peak VmRSS (sampled every 100 ms, through sync and the idle window), idle CPU.
 */
async function measureControllerRuntime(cluster: LocalCluster, binary: string): Promise<Pick<Row, "crSyncS" | "crPeakRssMiB" | "crIdleCpuPercent">> {
  const started = performance.now();
  const child = spawn(binary, ["--mode", "noop", "--namespace", NS], {
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "", KUBECONFIG: cluster.kubeconfigPath },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const pid = child.pid ?? 0;
  let peakRss = 0;
  const sampler = setInterval(() => (peakRss = Math.max(peakRss, rssBytes(pid) ?? 0)), 100);
  const logs: string[] = [];
  child.stderr.setEncoding("utf8").on("data", (c: string) => logs.push(c));
  try {
    const synced = await new Promise<number>((resolve, reject) => {
      let rest = "";
      child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
        rest += chunk;
        if (rest.includes('"synced"')) resolve(performance.now());
      });
      child.once("exit", (code) => reject(new Error(`controller-runtime operator exited (${code}) before its sync: ${logs.join("").slice(-2000)}`)));
    });
    const idle = await idleCpuPercent(pid);
    peakRss = Math.max(peakRss, rssBytes(pid) ?? 0);
    return { crSyncS: (synced - started) / 1000, crPeakRssMiB: mib(peakRss), crIdleCpuPercent: idle };
  } finally {
    clearInterval(sampler);
    child.kill("SIGTERM");
    if (child.exitCode === null) await new Promise((r) => child.once("exit", r));
  }
}

async function main(): Promise<void> {
  if (gc === undefined) console.error("warning: run with --expose-gc for retained-heap figures");
  const sizes = (process.env.BENCH_SIZES ?? "1000,10000,50000,100000").split(",").map(Number);
  if (sizes.some((n) => !Number.isInteger(n) || n < 1))
    throw new Error(`BENCH_SIZES must be whole numbers ≥ 1, comma-separated (got ${process.env.BENCH_SIZES})`);
  const missing = missingToolchains().filter((m) => m.startsWith("go"));
  const crBinary = missing.length ? undefined : buildControllerRuntime((l) => console.error(l)).path;
  if (crBinary === undefined) console.error(`no controller-runtime column: needs ${missing.join("")}`);
  console.error("starting the local control plane and ElasticMQ…");
  // The process figures are for what the image runs: the bundle.
  const work = mkdtempSync(join(tmpdir(), "crdfn-bench-"));
  const entry = join(work, "bridge.mjs");
  await bundleBridge(entry);
  const cluster = await startCluster({ log: () => {} });
  const rows: Row[] = [];
  const skipped: string[] = [];
  try {
    await installTinyCrd(cluster);
    await createNamespace(cluster, NS);
    const tokenFile = await bridgeToken(cluster, work);
    let created = 0;
    let msPerObject = 0;
    for (const size of sizes) {
      const projected = (size - created) * msPerObject;
      if (projected > CREATE_BUDGET_MS) {
        skipped.push(
          `${size}: creating ${size - created} more objects would take ~${Math.round(projected / 1000)} s at the measured ${Math.round(1000 / msPerObject)} objects/s`,
        );
        continue;
      }
      console.error(`creating objects ${created}..${size}…`);
      const createMs = await createTinies(cluster, created, size);
      msPerObject = createMs / (size - created);
      created = size;
      console.error(`created in ${(createMs / 1000).toFixed(1)} s; measuring the bridge's initial sync…`);
      const inProcess = await measureInProcess(cluster, size);
      const processRow = await measureProcess(cluster, size, entry, tokenFile);
      console.error("measuring the no-op controller-runtime operator…");
      const cr = crBinary === undefined ? { crSyncS: null, crPeakRssMiB: null, crIdleCpuPercent: null } : await measureControllerRuntime(cluster, crBinary);
      rows.push({ objects: size, createS: createMs / 1000, ...inProcess, ...processRow, ...cr });
    }
  } finally {
    await cluster.stop();
  }

  const header = [
    "objects",
    "create (s)",
    "initial sync (s)",
    "all published (s)",
    "events/s",
    "retained heap (MiB)",
    "heap per 10k (MiB)",
    "process: sync (s)",
    "peak heap (MiB)",
    "peak RSS (MiB)",
    "idle CPU %",
    "cr: sync (s)",
    "cr: peak RSS (MiB)",
    "cr: idle CPU %",
    "RSS bridge ÷ cr",
  ];
  const opt = (x: number | null, digits: number) => (x === null ? "–" : x.toFixed(digits));
  const table = rows.map((r) =>
    [
      r.objects,
      r.createS.toFixed(1),
      r.syncS.toFixed(2),
      r.publishedS.toFixed(2),
      r.eventsPerS.toFixed(0),
      r.retainedHeapMiB.toFixed(2),
      r.heapPer10kMiB.toFixed(2),
      r.processSyncS.toFixed(2),
      r.processPeakHeapMiB.toFixed(1),
      r.processPeakRssMiB.toFixed(0),
      r.processIdleCpuPercent.toFixed(1),
      opt(r.crSyncS, 2),
      opt(r.crPeakRssMiB, 0),
      opt(r.crIdleCpuPercent, 1),
      r.crPeakRssMiB ? (r.processPeakRssMiB / r.crPeakRssMiB).toFixed(2) : "–",
    ].map(String),
  );
  const widths = header.map((h, i) => Math.max(h.length, ...table.map((row) => (row[i] ?? "").length)));
  const line = (cells: string[]) => `| ${cells.map((c, i) => c.padStart(widths[i] ?? 0)).join(" | ")} |`;
  console.log(line(header));
  console.log(`|${widths.map((w) => "-".repeat(w + 2)).join("|")}|`);
  for (const row of table) console.log(line(row));
  for (const s of skipped) console.log(`skipped ${s}`);
  console.log(
    `retained heap: the in-process bridge's heap after a full GC, fixed overhead included; process: the bundled bridge as the image runs it (own process, ${SHIPPED_NODE_OPTIONS}), start-up included; peak heap without forced GC; cr: a no-op controller-runtime operator (bench/peers/controller-runtime --mode=noop, typed informer caches of the objects and ConfigMaps) as its own process, start to informers synced.`,
  );
  mkdirSync("bench-results", { recursive: true });
  writeFileSync("bench-results/bridge.json", JSON.stringify({ rows, skipped }, null, 2));
}

await main();
