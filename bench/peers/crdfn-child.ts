// crdfn's whole local pipeline (cli/pipeline.ts: the bridge as its own process, the poller and
// the functions) in a process of its own, so the benchmark's driver is the same neutral process
// for every system and the functions' CPU is measured apart from it. Started by systems.ts with
// the cluster in CRDFN_PEERS_CLUSTER; prints one JSON line with the bridge's pid once ready;
// stops on SIGTERM.
import { KubeConfig } from "@kubernetes/client-node";
import { pino } from "pino";
import { startPipeline } from "../../cli/pipeline.ts";
import type { Operator } from "../../core/operator.ts";
import type { LocalCluster } from "../../emulator/types.ts";
import greeting from "../../examples/greeting/operator.ts";
import { CLUSTER_ENV, cpuProfileFlags, NAMESPACE_ENV, PROFILE_DIR_ENV, READY_TIMEOUT_ENV, RECEIVE_LOOPS_ENV, type ClusterHandle } from "./systems.ts";

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
  const pipeline = await startPipeline({
    cluster,
    queue: cluster.sqs,
    operators: [greeting] as ReadonlyArray<Operator<unknown>>,
    logger: pino({ level: "warn" }, pino.destination(2)),
    bridgeProcess: true,
    // As deployed, serving the run's namespace (as each peer watches one).
    identities: { namespaces: [process.env[NAMESPACE_ENV] ?? "default"] },
    // The bridge lists and publishes every waiting object before it reports ready (bench:coldscale).
    ...(process.env[READY_TIMEOUT_ENV] ? { bridgeReadyTimeoutMs: Number(process.env[READY_TIMEOUT_ENV]) } : {}),
    ...(process.env[RECEIVE_LOOPS_ENV] ? { receiveLoops: Number(process.env[RECEIVE_LOOPS_ENV]) } : {}),
    ...(process.env[PROFILE_DIR_ENV] ? { bridgeExtraNodeOptions: cpuProfileFlags(process.env[PROFILE_DIR_ENV]).join(" ") } : {}),
  });
  console.log(JSON.stringify({ bridgePid: pipeline.bridgeProcess.pid, bridgeHttpPort: pipeline.bridgeProcess.httpPort }));
  const stop = () => void pipeline.stop().then(() => process.exit(0));
  process.once("SIGTERM", stop);
  process.once("SIGINT", stop);
}

await main();
