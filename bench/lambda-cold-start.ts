// `npm run bench:cold`: the Lambda bundle's cold start, as `serverless package` builds it
// (serverless.yml's custom.esbuild settings and plugins, read from the file), in fresh Node
// processes: the import of the bundle, then the first invocation (a batch of one malformed
// message: the handler builds its runtime from the environment — config, cluster registry,
// logger, metrics — and calls no server; a cluster's API client and EKS token signer are built on
// that cluster's first event, so they are not in it), and the RSS after it.
// Network and Lambda's own bootstrap are not in it; everything crdfn adds to an Init Duration is.
// Then the same bundle in the real Lambda runtime (RIE with aws-lambda-ric as its bootstrap,
// emulator/local-lambda.ts), BENCH_RIE_RUNS times (0: skipped): each run a fresh RIE, timed from
// the first invocation's POST to its answer (RIE starts the runtime on the first invocation:
// init + handle, Lambda's cold start less the sandbox's) and from RIE's spawn, with the init
// RIE itself reports.
import { execFile } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { build, type BuildOptions, type Plugin } from "esbuild";
import { parse } from "yaml";
import { LAMBDA_RIC_VERSION } from "../emulator/lambda-ric.ts";
import { startLocalLambda } from "../emulator/local-lambda.ts";
import { packageRoot } from "../emulator/paths.ts";
import { percentile } from "./stats.ts";

const run = promisify(execFile);
const RUNS = Number(process.env.BENCH_RUNS ?? 15);
const RIE_RUNS = Number(process.env.BENCH_RIE_RUNS ?? 5);
const TARGET_MS = 150;

/** The esbuild options serverless-esbuild is given, with its plugins loaded the way it loads them. */
async function serverlessEsbuildOptions(): Promise<BuildOptions> {
  const custom = (parse(readFileSync(join(packageRoot, "serverless.yml"), "utf8")) as { custom: { esbuild: Record<string, unknown> } }).custom.esbuild;
  const { plugins, exclude: _exclude, outputFileExtension: _ext, ...options } = custom;
  const loaded = typeof plugins === "string" ? ((await import(join(packageRoot, plugins))) as { default: Plugin[] }).default : [];
  return { ...(options as BuildOptions), plugins: loaded, logLevel: "warning" };
}

const record = {
  messageId: "m-1",
  receiptHandle: "r",
  body: "{not json",
  attributes: { ApproximateReceiveCount: "1", MessageGroupId: "g" },
  messageAttributes: {},
  md5OfBody: "",
  eventSource: "aws:sqs",
  eventSourceARN: "arn:aws:sqs:us-east-1:123456789012:crdfn-greeting.fifo",
  awsRegion: "us-east-1",
};

const probe = (bundle: string): string => `
  const t0 = performance.now();
  const { handler } = await import(${JSON.stringify(bundle)});
  const t1 = performance.now();
  const out = await handler({ Records: [${JSON.stringify(record)}] }, { getRemainingTimeInMillis: () => 30000 });
  const t2 = performance.now();
  if (out.batchItemFailures?.[0]?.itemIdentifier !== "m-1") throw new Error("unexpected answer " + JSON.stringify(out));
  process.stdout.write(JSON.stringify({ importMs: t1 - t0, firstInvokeMs: t2 - t1, rssMiB: process.memoryUsage().rss / 1048576 }));`;

// What a deployed Greeting function has: EKS authentication, its requeue queue, Lambda's variables.
const lambdaEnv = {
  CRDFN_KUBE_AUTH: "eks",
  CRDFN_EKS_CLUSTER: "prod-cluster",
  CRDFN_KUBE_SERVER: "https://0123456789ABCDEF.gr7.us-east-1.eks.amazonaws.com",
  CRDFN_KUBE_CA_DATA: Buffer.from("-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n").toString("base64"),
  CRDFN_CLUSTER: "prod",
  // The plain setting (dev and tests): a deployed function reads CRDFN_EVENT_KEYS_SECRET instead, one Secrets Manager call at cold start (145–237 ms measured against moto, module load included) not timed here.
  CRDFN_EVENT_KEYS: `k1:${Buffer.alloc(32, 1).toString("base64")}`,
  CRDFN_STANDARD_QUEUE_URL: "https://sqs.us-east-1.amazonaws.com/123456789012/crdfn-greeting-requeue",
  AWS_REGION: "us-east-1",
  AWS_ACCESS_KEY_ID: "AKIDEXAMPLE",
  AWS_SECRET_ACCESS_KEY: "secret",
  AWS_LAMBDA_FUNCTION_NAME: "crdfn-greeting",
  LOG_LEVEL: "silent",
};

const work = mkdtempSync(join(tmpdir(), "crdfn-cold-"));
try {
  const bundle = join(work, "lambda.mjs");
  await build({ ...(await serverlessEsbuildOptions()), entryPoints: [join(packageRoot, "examples", "greeting", "lambda.ts")], outfile: bundle });
  const samples: Array<{ importMs: number; firstInvokeMs: number; rssMiB: number }> = [];
  for (let i = 0; i < RUNS; i++) {
    const { stdout } = await run(process.execPath, ["--input-type=module", "-e", probe(bundle)], {
      cwd: work,
      env: { PATH: process.env.PATH ?? "", ...lambdaEnv },
    });
    samples.push(JSON.parse(stdout) as (typeof samples)[number]);
  }
  const median = (f: (s: (typeof samples)[number]) => number): number =>
    percentile(
      samples.map(f).sort((a, b) => a - b),
      50,
    );
  const total = median((s) => s.importMs + s.firstInvokeMs);
  console.log(
    `Lambda bundle (examples/greeting, serverless.yml's esbuild settings): ${(statSync(bundle).size / 1024).toFixed(0)} KiB, Node ${process.version}, ${RUNS} fresh processes`,
  );
  console.log(`| import ms | first invocation ms | cold init ms (import + first invocation) | target ms | RSS MiB |`);
  console.log(`|---|---|---|---|---|`);
  console.log(
    `| ${median((s) => s.importMs).toFixed(0)} | ${median((s) => s.firstInvokeMs).toFixed(0)} | ${total.toFixed(0)} | ≤ ${TARGET_MS} ${total <= TARGET_MS ? "met" : "missed"} | ${median((s) => s.rssMiB).toFixed(0)} |`,
  );
  console.log(`medians; load average ${loadAverage()}`);
  if (RIE_RUNS > 0) await inLambdaRuntime(bundle);
} finally {
  rmSync(work, { recursive: true, force: true });
}

function loadAverage(): string {
  return readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ");
}

/** The bundle as `serverless package` zips it (examples/greeting/lambda.mjs), each run in a fresh RIE. */
async function inLambdaRuntime(bundle: string): Promise<void> {
  const taskRoot = join(work, "task");
  mkdirSync(join(taskRoot, "examples", "greeting"), { recursive: true });
  writeFileSync(join(taskRoot, "examples", "greeting", "lambda.mjs"), readFileSync(bundle));
  const { AWS_REGION: region, AWS_LAMBDA_FUNCTION_NAME: functionName, ...environment } = lambdaEnv;
  const samples: Array<{ firstInvocationMs: number; fromSpawnMs: number; initMs: number }> = [];
  for (let i = 0; i < RIE_RUNS; i++) {
    const lambda = await startLocalLambda({
      taskRoot,
      handler: "examples/greeting/lambda.handler",
      environment,
      functionName,
      timeoutSeconds: 30,
      memoryMiB: 256,
      region,
      log: (line) => console.error(line),
    });
    try {
      const posted = performance.now();
      const { status, body } = await lambda.invoke({ Records: [record] });
      const answered = performance.now();
      if (status !== 200 || (body as { batchItemFailures?: Array<{ itemIdentifier: string }> }).batchItemFailures?.[0]?.itemIdentifier !== "m-1")
        throw new Error(`unexpected answer ${status} ${JSON.stringify(body)}:\n${lambda.logTail()}`);
      // RIE's own account of the runtime's init: "INIT REPORT(durationMs: 123.4)".
      const init = /INIT REPORT\(durationMs: ([\d.]+)\)/.exec(readFileSync(lambda.logFile, "utf8"));
      samples.push({ firstInvocationMs: answered - posted, fromSpawnMs: answered - lambda.spawnedAt, initMs: Number(init?.[1] ?? Number.NaN) });
    } finally {
      await lambda.stop();
    }
  }
  const median = (f: (s: (typeof samples)[number]) => number): string =>
    percentile(
      samples.map(f).sort((a, b) => a - b),
      50,
    ).toFixed(0);
  console.log(`\nthe same bundle in the Lambda runtime (RIE + aws-lambda-ric ${LAMBDA_RIC_VERSION}, Node ${process.version}), ${RIE_RUNS} fresh RIE processes`);
  console.log(`| runtime init ms (RIE's INIT REPORT) | first invocation ms (POST → answer: init + handle) | RIE spawn → first answer ms |`);
  console.log(`|---|---|---|`);
  console.log(`| ${median((s) => s.initMs)} | ${median((s) => s.firstInvocationMs)} | ${median((s) => s.fromSpawnMs)} |`);
  console.log(`medians; load average ${loadAverage()}`);
}
