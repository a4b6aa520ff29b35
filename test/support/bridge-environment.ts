// What a bridge test runs on: a cluster with the CronTab CRD and a queue client, the bridge's
// configuration pointed at them, and the bridge run as a real child process.
import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import type { SQSClient } from "@aws-sdk/client-sqs";
import { pino, type Logger } from "pino";
import { loadBridgeConfig, type BridgeConfig } from "../../bridge/config.ts";
import { boundedRequests } from "../../clients/request-bounds.ts";
import { sqsClient } from "../../clients/sqs-client.ts";
import type { LocalCluster } from "../../emulator/types.ts";
import { CRONTAB_RESOURCE, installCrontabCrd } from "./crontabs.ts";
import { testCluster, type TestCluster, type TestClusterOptions } from "./test-cluster.ts";
import { TEST_EVENT_KEY_ENV } from "./event-key.ts";

/** Fails fast while the queue is down (outage tests), instead of the SDK's long retries. */
export function sqsClientFor(cluster: LocalCluster): SQSClient {
  return sqsClient(cluster.sqs, { maxAttempts: 2, requestHandler: boundedRequests(2000, 10_000) });
}

/** What every bridge test file stands on: a cluster (test-cluster.ts) with the CronTab CRD and a queue client. */
export async function startBridgeEnvironment(o: TestClusterOptions): Promise<{ cluster: TestCluster; sqs: SQSClient; stop(): Promise<void> }> {
  const cluster = await testCluster(o);
  try {
    installCrontabCrd(cluster);
  } catch (e) {
    await cluster.stop();
    throw e;
  }
  const sqs = sqsClientFor(cluster);
  return {
    cluster,
    sqs,
    async stop() {
      sqs.destroy();
      await cluster.stop();
    },
  };
}

export function testLogger(): Logger {
  return pino({ level: process.env.CRDFN_TEST_LOG ?? "silent" });
}

/**
 * Environment for a bridge pointed at the test cluster and its FIFO queue, watching the file's
 * own namespaces (a test cluster's: on a shared control plane, other files' objects are there too).
 */
export function bridgeEnv(cluster: LocalCluster & { namespaces?: string[]; shared?: boolean }, extra: Record<string, string> = {}): Record<string, string> {
  return {
    KUBECONFIG: cluster.kubeconfigPath,
    CRDFN_CLUSTER: "test",
    CRDFN_QUEUE_URL: cluster.sqs.queues.fifo,
    CRDFN_RESOURCES: CRONTAB_RESOURCE,
    // On servers of its own a bridge watches every namespace, as before (the path without CRDFN_NAMESPACES).
    ...(cluster.shared && cluster.namespaces ? { CRDFN_NAMESPACES: cluster.namespaces.join(",") } : {}),
    CRDFN_RESYNC_SECONDS: "0",
    CRDFN_HTTP_PORT: "0",
    AWS_REGION: cluster.sqs.region,
    AWS_ENDPOINT_URL_SQS: cluster.sqs.endpoint,
    AWS_ACCESS_KEY_ID: cluster.sqs.accessKeyId,
    AWS_SECRET_ACCESS_KEY: cluster.sqs.secretAccessKey,
    CRDFN_EVENT_KEY: TEST_EVENT_KEY_ENV.CRDFN_EVENT_KEY,
    ...extra,
  };
}

export function bridgeConfig(cluster: LocalCluster & { namespaces?: string[]; shared?: boolean }, extra: Record<string, string> = {}): BridgeConfig {
  return loadBridgeConfig(bridgeEnv(cluster, extra));
}

export interface BridgeProcess {
  child: ChildProcess;
  /** Resolves with the health port once the process logged "bridge started". */
  port: Promise<number>;
  /** Resolves once the process logged "initial sync done". */
  synced: Promise<void>;
  exited: Promise<number | null>;
  logs: string[];
}

/** Runs `node bridge/main.ts` (or a bundle of it) as a separate process, as the container does. */
export function spawnBridge(env: Record<string, string>, entry = "bridge/main.ts"): BridgeProcess {
  const child = spawn(process.execPath, [entry], { env: { PATH: process.env.PATH ?? "", ...env }, stdio: ["ignore", "pipe", "pipe"] });
  const logs: string[] = [];
  let resolvePort: (p: number) => void = () => undefined;
  let resolveSynced: () => void = () => undefined;
  const port = new Promise<number>((r) => (resolvePort = r));
  const synced = new Promise<void>((r) => (resolveSynced = r));
  let rest = "";
  child.stdout.setEncoding("utf8");
  child.stdout.on("data", (chunk: string) => {
    const lines = (rest + chunk).split("\n");
    rest = lines.pop() ?? "";
    for (const line of lines) {
      logs.push(line);
      try {
        const rec = JSON.parse(line) as { msg?: string; port?: number };
        if (rec.msg === "bridge started" && rec.port !== undefined) resolvePort(rec.port);
        if (rec.msg === "initial sync done") resolveSynced();
      } catch {
        // not a log record
      }
    }
  });
  child.stderr.setEncoding("utf8");
  child.stderr.on("data", (chunk: string) => logs.push(chunk));
  const exited = once(child, "exit").then(([code]) => code as number | null);
  return { child, port, synced, exited, logs };
}
