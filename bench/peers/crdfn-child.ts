// crdfn's whole local pipeline (cli/local/pipeline.ts: the bridge as its own process, the poller and
// the functions) in a process of its own, so the benchmark's driver is the same neutral process
// for every system and the functions' CPU is measured apart from it. Started by systems.ts with
// the cluster in CRDFN_PEERS_CLUSTER; prints one JSON line with the bridge's pid once ready;
// stops on SIGTERM. With CRDFN_PEERS_PLATFORM_KINDS=n it serves bench:platform's n kinds (one
// project, one bridge) instead of the example Greeting. It counts the poller's and the
// functions' requests to the queue (the bridge's own are on its /metrics), and the reconciles
// and the time inside them, and serves the counts as JSON on a loopback port named in the ready
// line (queueRequests, reconciles, reconcileMs).
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { KubeConfig } from "@kubernetes/client-node";
import { pino } from "pino";
import { startPipeline } from "../../cli/local/pipeline.ts";
import type { Operator } from "../../core/operator.ts";
import type { LocalCluster } from "../../emulator/types.ts";
import greeting from "../../examples/greeting/operator.ts";
import { platformOperators } from "../platform/kinds.ts";
import {
  BRIDGE_NODE_OPTIONS_ENV,
  CLUSTER_ENV,
  cpuProfileFlags,
  NAMESPACE_ENV,
  PLATFORM_KINDS_ENV,
  PROFILE_DIR_ENV,
  READY_TIMEOUT_ENV,
  RECEIVE_LOOPS_ENV,
  type ClusterHandle,
} from "./systems.ts";

async function main(): Promise<void> {
  const handle = JSON.parse(process.env[CLUSTER_ENV] ?? "null") as ClusterHandle | null;
  if (handle === null) throw new Error(`${CLUSTER_ENV} is not set (this process is started by bench/peers)`);
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(handle.kubeconfigPath);
  const notOurs = () => Promise.reject(new Error("the benchmark's parent owns the cluster"));
  const notOursNow = () => {
    throw new Error("the benchmark's parent owns the cluster");
  };
  const control = { stop: notOurs, start: notOurs, pause: notOursNow, resume: notOursNow };
  const cluster: LocalCluster = { ...handle, kubeConfig, queue: control, apiServer: control, stop: notOurs };
  const kinds = Number(process.env[PLATFORM_KINDS_ENV] ?? 0);
  const profileDir = process.env[PROFILE_DIR_ENV];
  const bridgeNodeOptions = [process.env[BRIDGE_NODE_OPTIONS_ENV] ?? "", ...(profileDir ? cpuProfileFlags(profileDir) : [])].join(" ").trim();
  const queueRequests: Record<string, number> = {};
  const reconciles = { count: 0, ms: 0 };
  const counts = createServer((_req, res) => res.end(JSON.stringify({ queueRequests, reconciles: reconciles.count, reconcileMs: reconciles.ms })));
  await new Promise<void>((resolve) => counts.listen(0, "127.0.0.1", resolve));
  const pipeline = await startPipeline({
    cluster,
    queue: cluster.sqs,
    operators: kinds > 0 ? platformOperators(kinds) : ([greeting] as ReadonlyArray<Operator<unknown>>),
    onQueueRequest: (command) => (queueRequests[command] = (queueRequests[command] ?? 0) + 1),
    onReconcile: (r) => {
      reconciles.count++;
      reconciles.ms += r.latencyMs;
    },
    logger: pino({ level: "warn" }, pino.destination(2)),
    bridgeProcess: true,
    // As deployed, serving the run's namespace (as each peer watches one).
    identities: { namespaces: [process.env[NAMESPACE_ENV] ?? "default"] },
    // The bridge lists and publishes every waiting object before it reports ready (bench:coldscale).
    ...(process.env[READY_TIMEOUT_ENV] ? { bridgeReadyTimeoutMs: Number(process.env[READY_TIMEOUT_ENV]) } : {}),
    ...(process.env[RECEIVE_LOOPS_ENV] ? { receiveLoops: Number(process.env[RECEIVE_LOOPS_ENV]) } : {}),
    ...(bridgeNodeOptions ? { bridgeExtraNodeOptions: bridgeNodeOptions } : {}),
  });
  const queueRequestsPort = (counts.address() as AddressInfo).port;
  console.log(JSON.stringify({ bridgePid: pipeline.bridgeProcess.pid, bridgeHttpPort: pipeline.bridgeProcess.httpPort, queueRequestsPort }));
  const stop = () => void pipeline.stop().then(() => process.exit(0));
  process.once("SIGTERM", stop);
  process.once("SIGINT", stop);
}

await main();
