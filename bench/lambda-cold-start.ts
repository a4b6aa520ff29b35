// `npm run bench:cold`: the Lambda bundle's cold start, as `serverless package` builds it
// (serverless.yml's custom.esbuild settings and plugins, read from the file), in fresh Node
// processes: the import of the bundle, then the first invocation (a batch of one malformed
// message: the handler builds its runtime from the environment — config, cluster registry,
// logger, metrics — and calls no server; a cluster's API client and EKS token signer are built on
// that cluster's first event, so they are not in it), and the RSS after it.
// Network and Lambda's own bootstrap are not in it; everything crdfn adds to an Init Duration is.
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { build, type BuildOptions, type Plugin } from "esbuild";
import { parse } from "yaml";
import { packageRoot } from "../emulator/paths.ts";
import { percentile } from "./stats.ts";

const run = promisify(execFile);
const RUNS = Number(process.env.BENCH_RUNS ?? 15);
const TARGET_MS = 150;

/** The esbuild options serverless-esbuild is given, with its plugins loaded the way it loads them. */
async function serverlessEsbuildOptions(): Promise<BuildOptions> {
  const custom = (parse(readFileSync(join(packageRoot, "serverless.yml"), "utf8")) as { custom: { esbuild: Record<string, unknown> } }).custom.esbuild;
  const { plugins, exclude: _exclude, outputFileExtension: _ext, ...options } = custom;
  const loaded = typeof plugins === "string" ? ((await import(join(packageRoot, plugins))) as { default: Plugin[] }).default : [];
  return { ...(options as BuildOptions), plugins: loaded, logLevel: "warning" };
}

const probe = (bundle: string): string => `
  const t0 = performance.now();
  const { handler } = await import(${JSON.stringify(bundle)});
  const t1 = performance.now();
  const record = { messageId: "m-1", receiptHandle: "r", body: "{not json", attributes: { ApproximateReceiveCount: "1", MessageGroupId: "g" },
    messageAttributes: {}, md5OfBody: "", eventSource: "aws:sqs", eventSourceARN: "arn:aws:sqs:us-east-1:123456789012:crdfn-greeting.fifo", awsRegion: "us-east-1" };
  const out = await handler({ Records: [record] }, { getRemainingTimeInMillis: () => 30000 });
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
  // Resolved by CloudFormation at deploy (deploy/serverless.ts): read from the environment, no call at cold start.
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
    const { stdout } = await run(process.execPath, ["--input-type=module", "-e", probe(bundle)], { cwd: work, env: { PATH: process.env.PATH ?? "", ...lambdaEnv } });
    samples.push(JSON.parse(stdout) as (typeof samples)[number]);
  }
  const median = (f: (s: (typeof samples)[number]) => number): number => percentile(samples.map(f).sort((a, b) => a - b), 50);
  const total = median((s) => s.importMs + s.firstInvokeMs);
  console.log(`Lambda bundle (examples/greeting, serverless.yml's esbuild settings): ${(statSync(bundle).size / 1024).toFixed(0)} KiB, Node ${process.version}, ${RUNS} fresh processes`);
  console.log(`| import ms | first invocation ms | cold init ms (import + first invocation) | target ms | RSS MiB |`);
  console.log(`|---|---|---|---|---|`);
  console.log(`| ${median((s) => s.importMs).toFixed(0)} | ${median((s) => s.firstInvokeMs).toFixed(0)} | ${total.toFixed(0)} | ≤ ${TARGET_MS} ${total <= TARGET_MS ? "met" : "missed"} | ${median((s) => s.rssMiB).toFixed(0)} |`);
  console.log(`medians; load average ${readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ")}`);
} finally {
  rmSync(work, { recursive: true, force: true });
}
