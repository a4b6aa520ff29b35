// `npm run bench`: the whole local pipeline under load, against targets. A tool of this
// checkout, not of the published CLI (it drives the example Greeting operator).
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { Command, InvalidArgumentError } from "commander";
import { parse } from "yaml";
import type { FunctionTarget } from "../cli/local/dev-target.ts";
import { cloudRunChangeCost, formatCloudRunCost } from "./cloudrun-cost.ts";
import { runPipelineBench, type BenchResult } from "./pipeline.ts";
import { changeCost, checkTargets, formatCost, formatReport, type DeployedFunction } from "./report.ts";
import { packageRoot } from "../emulator/paths.ts";
import { runBench, wholeNumber } from "./command-line.ts";

/** The function's memory and architecture as this checkout deploys it: what its GB-seconds are priced at. */
function deployedFunction(): DeployedFunction {
  const file = join(packageRoot, "serverless.yml");
  const provider = (parse(readFileSync(file, "utf8")) as { provider?: { memorySize?: unknown; architecture?: unknown } }).provider ?? {};
  const { memorySize, architecture } = provider;
  if (typeof memorySize !== "number" || (architecture !== "arm64" && architecture !== "x86_64")) {
    throw new Error(`${file}: provider.memorySize (a number) and provider.architecture (arm64 or x86_64) are needed to price the function`);
  }
  return { memoryMiB: memorySize, architecture };
}

/** The rated phase priced for its target: SQS and Lambda, or Pub/Sub and Cloud Run functions. */
function priced(result: BenchResult): { cost: unknown; text: string } {
  if (result.params.target === "cloudrun") {
    const cost = cloudRunChangeCost(result);
    return { cost, text: formatCloudRunCost(cost) };
  }
  const cost = changeCost(result, deployedFunction());
  return { cost, text: formatCost(cost) };
}

const targetName = (text: string): FunctionTarget => {
  if (text !== "lambda" && text !== "cloudrun") throw new InvalidArgumentError("--target must be lambda or cloudrun");
  return text;
};

function benchCommand(): Command {
  return new Command("npm run bench --")
    .description(
      "benchmark the whole local pipeline (API server, bridge process, queue, functions) as `crdfn dev --target <target>` runs it: " +
        "spec-write → status latency at a fixed rate, reconciles/s at full load, the raw status-patch ceiling of the same API server, " +
        "API calls per reconcile, bridge RSS, and what a change costs at list prices",
    )
    .option(
      "--target <target>",
      "lambda: ElasticMQ and the poller; cloudrun: the Pub/Sub emulator, the push deliverer and functions-framework, " +
        "setup and rated phases only (what a change costs is measured at a steady rate)",
      targetName,
      "lambda" as FunctionTarget,
    )
    .option("--objects <n>", "Greetings to create", wholeNumber("--objects"), 1000)
    .option("--rate <n>", "spec changes per second in the rated phase", wholeNumber("--rate"), 50)
    .option("--duration <seconds>", "length of each measured phase", wholeNumber("--duration"), 20)
    .option(
      "--concurrency <n>",
      "changes in flight (closed loop), status patches in flight (raw ceiling), spec writers (full load)",
      wholeNumber("--concurrency"),
      32,
    )
    .option(
      "--receive-loops <n>",
      "concurrent receive loops of the local poller on the FIFO queue (default: as crdfn dev; lambda target only)",
      wholeNumber("--receive-loops"),
    )
    .option("--json <path>", "where to write the results (default bench-results/pipeline-<timestamp>.json)")
    .action(
      async (o: { target: FunctionTarget; objects: number; rate: number; duration: number; concurrency: number; receiveLoops?: number; json?: string }) => {
        if (o.target === "cloudrun" && o.receiveLoops !== undefined) {
          console.error("--receive-loops sets the local poller's loops: the lambda target's, not cloudrun's");
          process.exitCode = 2;
          return;
        }
        const result = await runPipelineBench({
          target: o.target,
          objects: o.objects,
          rate: o.rate,
          durationSeconds: o.duration,
          concurrency: o.concurrency,
          ...(o.receiveLoops === undefined ? {} : { receiveLoops: o.receiveLoops }),
          log: (line) => console.error(line),
        });
        const targets = checkTargets(result);
        const { cost, text } = priced(result);
        console.log(formatReport(result, targets));
        console.log(`\n${text}`);
        const path =
          o.json ?? join(packageRoot, "bench-results", `pipeline-${o.target === "lambda" ? "" : `${o.target}-`}${result.startedAt.replace(/[:.]/g, "-")}.json`);
        mkdirSync(dirname(path), { recursive: true });
        writeFileSync(path, `${JSON.stringify({ ...result, targets, cost }, null, 2)}\n`);
        console.log(`\nresults: ${path}`);
      },
    );
}

await runBench("bench", benchCommand());
