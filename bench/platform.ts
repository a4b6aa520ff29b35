// `npm run bench:platform`: the platform team's bill. Ten Greeting-shaped kinds, each
// with its operator owning one ConfigMap per object, run on one embedded cluster twice, one system
// after the other: crdfn as ONE project (one bridge for the ten kinds; its functions off-cluster)
// and ten controller-runtime operators, one process per kind. Side by side: cluster-side RSS, idle
// CPU, latency and CPU per change at a fixed rate spread over the kinds, API requests per change,
// watches held open on the API server, and crdfn's queue requests per change; checked against
// the bars of docs/performance.md. A tool of this checkout (it builds the Go operator), not of the published CLI.
import { mkdirSync, writeFileSync } from "node:fs";
import { cpus, loadavg, totalmem } from "node:os";
import { dirname, join } from "node:path";
import { Command } from "commander";
import { installCrds } from "../cli/local/install-crds.ts";
import { sqsClient } from "../clients/sqs-client.ts";
import { startCluster } from "../emulator/cluster.ts";
import { packageRoot } from "../emulator/paths.ts";
import { startReaper } from "../emulator/reaper.ts";
import { buildControllerRuntime, missingToolchains } from "./peers/build.ts";
import { platformKinds, platformOperators } from "./platform/kinds.ts";
import { checkBars, formatPlatformReport, formatTracedPlatform } from "./platform/report.ts";
import { openWatches, runPlatform, type PlatformRun } from "./platform/run.ts";
import { printReport, QUEUE_IN_MEMORY_HELP, runBench, wholeNumber } from "./command-line.ts";
import { splitRefusal } from "./proc.ts";

interface Options {
  kinds: number;
  objects: number;
  rate: number;
  duration: number;
  idle: number;
  split: boolean;
  queueInMemory?: boolean;
  quick?: boolean;
  profile?: boolean;
  traced: boolean;
  json?: string;
}

const QUICK = { kinds: 10, objects: 5, rate: 10, duration: 5, idle: 10 };

/** Until the controller-manager watches every new kind (its garbage collector's monitors, after its next discovery), at most 180 s. */
async function untilControllerManagerWatches(
  kubeConfig: Parameters<typeof openWatches>[0],
  plurals: readonly string[],
  log: (line: string) => void,
): Promise<void> {
  for (const t = performance.now(); ;) {
    const open = await openWatches(kubeConfig);
    if (plurals.every((p) => (open[p] ?? 0) >= 1)) return;
    if (performance.now() - t > 180_000) {
      log("the controller-manager watches not every kind after 180 s; going on (the first system's watch count may include its late ones)");
      return;
    }
    await new Promise((r) => setTimeout(r, 1000));
  }
}

/** `quick`: QUICK's figures for every option not given on the command line. */
export async function runPlatformBench(
  o: Options,
  log: (line: string) => void,
  given: (key: keyof typeof QUICK) => boolean = () => false,
): Promise<{ path: string; report: string }> {
  const refusal = o.split ? splitRefusal() : undefined;
  if (refusal !== undefined) throw new Error(refusal);
  const p: Options = { ...o };
  if (o.quick) for (const [k, v] of Object.entries(QUICK) as [keyof typeof QUICK, number][]) if (!given(k)) p[k] = v;
  const missing = missingToolchains().filter((m) => m.startsWith("go"));
  if (missing.length) throw new Error(`bench:platform needs ${missing.join(" and ")}`);
  const startedAt = new Date().toISOString();
  const controllerRuntime = buildControllerRuntime(log, "platform-controller-runtime");
  log(`build: controller-runtime ${controllerRuntime.seconds} s`);
  const kinds = platformKinds(p.kinds);

  log("starting the embedded cluster…");
  const cluster = await startCluster({ log: () => {}, queueStorage: p.queueInMemory ? "memory" : "disk" });
  const reaper = startReaper();
  const sqs = sqsClient(cluster.sqs);
  const runs: PlatformRun[] = [];
  // Beside the two systems' runs, not among them: the bars compare crdfn untraced.
  let traced: PlatformRun | undefined;
  try {
    await installCrds(cluster.kubeConfig, platformOperators(p.kinds));
    // The controller-manager watches every new kind too: counted before either system starts, so
    // neither is charged with them.
    log("waiting for the controller-manager to watch the new kinds…");
    await untilControllerManagerWatches(
      cluster.kubeConfig,
      kinds.map((k) => k.plural),
      log,
    );
    const options = {
      objectsPerKind: p.objects,
      rate: p.rate,
      ratedSeconds: p.duration,
      idleSeconds: p.idle,
      split: p.split,
      profile: Boolean(p.profile),
      log,
    };
    // One system at a time: the API server's counters and watch gauge have no client label, so
    // what each system asked of it is told apart by time alone.
    runs.push(await runPlatform("crdfn", kinds, cluster, sqs, controllerRuntime.path, reaper, options));
    if (p.traced) traced = await runPlatform("crdfn", kinds, cluster, sqs, controllerRuntime.path, reaper, { ...options, traced: true });
    runs.push(await runPlatform("controller-runtime", kinds, cluster, sqs, controllerRuntime.path, reaper, options));
  } finally {
    sqs.destroy();
    await reaper.release();
    await cluster.stop();
  }
  const [crdfn, cr] = runs as [PlatformRun, PlatformRun];
  const bars = checkBars(crdfn, cr);
  const result = {
    startedAt,
    finishedAt: new Date().toISOString(),
    machine: { cpus: cpus().length, memoryGiB: Math.round(totalmem() / 2 ** 30), node: process.version, loadAvgEnd: loadavg() },
    params: {
      kinds: p.kinds,
      objectsPerKind: p.objects,
      rate: p.rate,
      ratedSeconds: p.duration,
      idleSeconds: p.idle,
      split: p.split,
      queueInMemory: Boolean(p.queueInMemory),
      quick: Boolean(o.quick),
      traced: p.traced,
    },
    build: controllerRuntime,
    runs,
    traced: traced ?? null,
    bars,
  };
  const path = o.json ?? join(packageRoot, "bench-results", `platform-${startedAt.replace(/[:.]/g, "-")}.json`);
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, `${JSON.stringify(result, null, 2)}\n`);
  const breakdown = traced ? `\n\n${formatTracedPlatform(crdfn, traced)}` : "";
  return { path, report: `${headerOf(p, startedAt)}\n\n${formatPlatformReport(crdfn, cr, bars)}${breakdown}` };
}

/** The report's first line: what ran, on what machine. */
const headerOf = (p: Options, startedAt: string): string =>
  `bench:platform — ${p.kinds} kinds × ${p.objects} objects, ${p.rate} changes/s for ${p.duration} s, idle ${p.idle} s` +
  `${p.split ? " (--split: the cluster side on CPU 0; ElasticMQ, the poller and functions, and the driver on CPU 1)" : ""}` +
  `${p.queueInMemory ? " (--queue-in-memory: ElasticMQ without its H2 store)" : ""}; ` +
  `${cpus().length} cores, node ${process.version}, ${startedAt}`;

function platformCommand(): Command {
  return new Command("npm run bench:platform --")
    .description(
      "the platform's bill: N Greeting-shaped kinds, each owning a ConfigMap per object, served by crdfn as one project (one bridge) " +
        "and by N controller-runtime operators, one after the other on one embedded cluster: cluster-side RSS, idle CPU, p50 and CPU per change " +
        "at a fixed rate spread over the kinds, API requests per change, watches held open on the API server, SQS requests per change; " +
        "checked against the bars of docs/performance.md (RSS ≤ 0.3×, idle CPU ≤ 0.5×, API requests equal, p50 ≤ 1.5×, fewer watches, ≤ 1.0 SQS request per change)",
    )
    .option("--kinds <n>", "kinds (and controller-runtime processes)", wholeNumber("--kinds"), 10)
    .option("--objects <n>", "objects per kind", wholeNumber("--objects"), 1000)
    .option("--rate <n>", "spec changes per second in the rated phase, spread over the kinds", wholeNumber("--rate"), 50)
    .option("--duration <seconds>", "length of the rated phase", wholeNumber("--duration"), 30)
    .option("--idle <seconds>", "length of the idle window (CPU, RSS and watches with nothing changing)", wholeNumber("--idle"), 300)
    .option(
      "--split",
      "run the cluster side (etcd, kube-apiserver, kube-controller-manager, the bridge or the operators) on CPU 0 and what production runs off the cluster (ElasticMQ, the poller and functions, this driver) on CPU 1, for both systems",
      false,
    )
    .option("--queue-in-memory", QUEUE_IN_MEMORY_HELP)
    .option("--profile", "CPU-profile crdfn's bridge and function process over its whole run (node --cpu-prof); the top self time goes into the JSON")
    .option("--no-traced", "skip crdfn's second, traced run (its stage breakdown from the spans, and tracing's own cost against the untraced run)")
    .option("--quick", `a smoke: ${JSON.stringify(QUICK)} unless given`)
    .option("--json <path>", "where to write the results (default bench-results/platform-<timestamp>.json)")
    .action(printReport<Options>(runPlatformBench));
}

await runBench("bench:platform", platformCommand());
