// The servers the integration files share, started once per integration run as its global
// setup (run-integration.ts): one ElasticMQ and LANES control planes (etcd, kube-apiserver,
// kube-controller-manager). Their addresses reach the test files through SHARED_ENV.
//
// Why more than one control plane: the admission policies crdfn generates are cluster-scoped,
// one per operator, and name the namespaces it serves; two files serving the same example
// operator in different namespaces at the same time would refuse each other's writes. So each
// control plane (a "lane") serves one file at a time (test-cluster.ts leases it), and there are
// as many lanes as files run at once (LANES is the runner's concurrency). The queue server has no such state:
// every file gets queues of its own on the one ElasticMQ.
//
// The local Lambda runtime (RIE and aws-lambda-ric, for test/lambda-runtime.test.ts) is built here
// too, beside the control planes, on the first run of a machine; its failure is one line here
// and that file's own failure, not the run's.
//
// Nothing outlives the run: startCluster() hands every server to a reaper process that ends them
// when this process ends, however it ends (a crash, a SIGKILL, Ctrl-C).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startCluster, type LocalCluster } from "../../emulator/cluster.ts";
import { localLambdaRuntime } from "../../emulator/local-lambda.ts";
import { SHARED_ENV, type SharedServers } from "./shared-env.ts";

/** Control planes, and so test files run at once (run-integration.ts's concurrency). */
export const LANES = Number(process.env.CRDFN_TEST_LANES ?? 3);

const started: LocalCluster[] = [];
let lockDir: string | undefined;

export async function globalSetup(): Promise<void> {
  const t0 = Date.now();
  lockDir = mkdtempSync(join(tmpdir(), "crdfn-test-lanes-"));
  const lambdaRuntime = localLambdaRuntime({ env: process.env, log: (line) => console.error(`# ${line}`) }).catch((e: unknown) => {
    console.error(`# the local Lambda runtime could not be prepared (test/lambda-runtime.test.ts will fail): ${(e as Error).message.split("\n")[0]}`);
  });
  // The first lane brings ElasticMQ; the others are control planes only (their queue is the first's).
  const clusters = await Promise.allSettled(Array.from({ length: LANES }, (_, i) => startCluster({ log: () => {}, queue: i === 0 })));
  await lambdaRuntime;
  for (const c of clusters) if (c.status === "fulfilled") started.push(c.value);
  const failed = clusters.find((c) => c.status === "rejected");
  if (failed) {
    await globalTeardown();
    throw failed.reason;
  }
  const [first] = started;
  if (!first) throw new Error(`CRDFN_TEST_LANES=${LANES}: at least one lane is needed`);
  const { endpoint, region, accessKeyId, secretAccessKey } = first.sqs;
  const shared: SharedServers = {
    lockDir,
    sqs: { endpoint, region, accessKeyId, secretAccessKey },
    lanes: started.map((c) => ({ kubeconfigPath: c.kubeconfigPath, server: c.server, kubectl: c.kubectl, caPath: c.caPath })),
  };
  // The runner starts each test file after this returns, with this process's environment.
  process.env[SHARED_ENV] = JSON.stringify(shared);
  console.error(`# shared servers: ${started.length} control planes and ElasticMQ, up in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
}

export async function globalTeardown(): Promise<void> {
  await Promise.all(started.splice(0).map((c) => c.stop()));
  if (lockDir) rmSync(lockDir, { recursive: true, force: true });
}
