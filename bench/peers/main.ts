// `npm run bench:peers`: crdfn next to controller-runtime (1 and 8 workers) and kopf (default and
// tuned) doing the example Greeting's reconcile on one embedded cluster, one system at a time,
// interleaved over rounds, measured by one driver; a table of ratios crdfn ÷ peer and a JSON file.
import { mkdirSync, writeFileSync } from "node:fs";
import { cpus, loadavg } from "node:os";
import { dirname, join } from "node:path";
import { Command, InvalidArgumentError, Option } from "commander";
import { installCrds } from "../../cli/local/install-crds.ts";
import type { Operator } from "../../core/operator.ts";
import { startCluster } from "../../emulator/cluster.ts";
import { sqsClient } from "../../clients/sqs-client.ts";
import { packageRoot } from "../../emulator/paths.ts";
import { startReaper } from "../../emulator/reaper.ts";
import greeting from "../../examples/greeting/operator.ts";
import { buildControllerRuntime, ensureKopfVenv, missingToolchains } from "./build.ts";
import { formatPeersReport, medians, ratios, tracingCost } from "./report.ts";
import { runOnce, type RunResult } from "./run.ts";
import { SYSTEMS, type SystemName } from "./systems.ts";
import { printReport, runBench, wholeNumber } from "../command-line.ts";

const systemList = (text: string): SystemName[] => {
  const names = text.split(",").map((s) => s.trim());
  const unknown = names.filter((n) => !(SYSTEMS as readonly string[]).includes(n));
  if (unknown.length) throw new InvalidArgumentError(`unknown system ${unknown.join(", ")} (known: ${SYSTEMS.join(", ")})`);
  return names as SystemName[];
};

interface Options {
  objects: number;
  rate: number;
  duration: number;
  concurrency: number;
  rounds: number;
  systems: SystemName[];
  maxLoad: number;
  quietWait: number;
  traced: boolean;
  quick?: boolean;
  json?: string;
}

const QUICK = { objects: 20, rate: 5, duration: 3, concurrency: 4, rounds: 1, quietWait: 0 };
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** crdfn runs untraced and traced in each round, in turn first, so neither always has the warmer machine. */
const tracedRuns = (system: SystemName, round: number, traced: boolean): boolean[] =>
  system !== "crdfn" || !traced ? [false] : round % 2 ? [false, true] : [true, false];

/** Waits up to `waitSeconds` for the 1-minute load average to fall to `maxLoad`; reports what it saw. */
async function untilQuiet(
  maxLoad: number,
  waitSeconds: number,
  log: (l: string) => void,
): Promise<{ maxLoad: number; quiet: boolean; waitedSeconds: number; loadAvg: number[] }> {
  const t0 = performance.now();
  let announced = false;
  while ((loadavg()[0] ?? 0) > maxLoad && performance.now() - t0 < waitSeconds * 1000) {
    if (!announced) log(`waiting up to ${waitSeconds} s for a quiet machine (load ${loadavg()[0]?.toFixed(2)} > ${maxLoad})…`);
    announced = true;
    await sleep(5000);
  }
  const quiet = (loadavg()[0] ?? 0) <= maxLoad;
  if (!quiet) log(`machine still busy (load ${loadavg()[0]?.toFixed(2)}); running anyway, the load is recorded with every run`);
  return { maxLoad, quiet, waitedSeconds: Math.round((performance.now() - t0) / 1000), loadAvg: loadavg() };
}

/** `quick`: QUICK's figures for every option not given on the command line. */
export async function runPeers(
  o: Options,
  log: (line: string) => void,
  given: (key: keyof typeof QUICK) => boolean = () => false,
): Promise<{ path: string; report: string }> {
  const p: Options = { ...o };
  if (o.quick) for (const [k, v] of Object.entries(QUICK) as [keyof typeof QUICK, number][]) if (!given(k)) p[k] = v;
  const missing = missingToolchains();
  if (missing.length) throw new Error(`bench:peers needs ${missing.join(" and ")}`);
  const startedAt = new Date().toISOString();
  const controllerRuntime = buildControllerRuntime(log);
  const kopf = ensureKopfVenv(log);
  log(`builds: controller-runtime ${controllerRuntime.seconds} s, kopf venv ${kopf.seconds} s`);
  const quiet = await untilQuiet(p.maxLoad, p.quietWait, log);

  log("starting the embedded cluster…");
  const cluster = await startCluster({ log: () => {} });
  const reaper = startReaper();
  const sqs = sqsClient(cluster.sqs);
  const runs: RunResult[] = [];
  try {
    await installCrds(cluster.kubeConfig, [greeting] as ReadonlyArray<Operator<unknown>>);
    for (let round = 1; round <= p.rounds; round++) {
      // Each round starts with the next system, so none always runs first (or after the same one).
      const order = p.systems.map((_, i) => p.systems[(i + round - 1) % p.systems.length] as SystemName);
      for (const system of order) {
        for (const traced of tracedRuns(system, round, p.traced)) {
          runs.push(
            await runOnce(system, round, cluster, sqs, { controllerRuntime: controllerRuntime.path, kopfPython: kopf.path }, reaper, {
              objects: p.objects,
              rate: p.rate,
              durationSeconds: p.duration,
              concurrency: p.concurrency,
              traced,
              log,
            }),
          );
        }
      }
    }
  } finally {
    sqs.destroy();
    await reaper.release();
    await cluster.stop();
  }
  const m = medians(runs);
  const result = {
    startedAt,
    finishedAt: new Date().toISOString(),
    machine: { cpus: cpus().length, node: process.version, loadAvgEnd: loadavg() },
    quiet,
    params: {
      objects: p.objects,
      rate: p.rate,
      durationSeconds: p.duration,
      concurrency: p.concurrency,
      rounds: p.rounds,
      systems: p.systems,
      traced: p.traced,
      quick: Boolean(o.quick),
    },
    builds: { controllerRuntime, kopf },
    runs,
    medians: m,
    ratios: ratios(m),
    tracing: tracingCost(runs),
  };
  const path = o.json ?? join(packageRoot, "bench-results", `peers-${startedAt.replace(/[:.]/g, "-")}.json`);
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, `${JSON.stringify(result, null, 2)}\n`);
  return { path, report: formatPeersReport(runs) };
}

function peersCommand(): Command {
  return new Command("npm run bench:peers --")
    .description(
      "crdfn next to controller-runtime (1 and 8 workers) and kopf (default, tuned), the example Greeting's reconcile on one embedded cluster: " +
        "setup time, latency at a fixed rate, changes/s in a closed loop, the raw status-patch ceiling, CPU per change (cluster-side, off-cluster), API requests per change, peak RSS",
    )
    .option("--objects <n>", "Greetings per run", wholeNumber("--objects"), 1000)
    .option("--rate <n>", "spec changes per second in the rated phase", wholeNumber("--rate"), 50)
    .option("--duration <seconds>", "length of each measured phase", wholeNumber("--duration"), 30)
    .option("--concurrency <n>", "changes in flight (closed loop) and status patches in flight (raw ceiling)", wholeNumber("--concurrency"), 32)
    .option("--rounds <n>", "runs of every system, interleaved", wholeNumber("--rounds"), 2)
    .addOption(new Option("--systems <list>", `comma-separated (${SYSTEMS.join(",")})`).argParser(systemList).default([...SYSTEMS]))
    .option(
      "--max-load <load>",
      "wait for the 1-minute load average to fall to this first",
      (t) => {
        const n = Number(t);
        if (!Number.isFinite(n) || n <= 0) throw new InvalidArgumentError("--max-load must be a number > 0");
        return n;
      },
      Math.max(0.5, cpus().length * 0.25),
    )
    .option("--quiet-wait <seconds>", "how long to wait for that before running anyway", wholeNumber("--quiet-wait"), 300)
    .option(
      "--no-traced",
      "skip crdfn's second, traced run in each round (its stage breakdown from the spans, and tracing's own cost against the untraced run)",
    )
    .option("--quick", `a smoke: ${JSON.stringify(QUICK)} unless given`)
    .option("--json <path>", "where to write the results (default bench-results/peers-<timestamp>.json)")
    .action(printReport<Options>(runPeers));
}

await runBench("bench:peers", peersCommand());
