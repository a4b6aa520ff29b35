import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { Command } from "commander";
import { startCluster, type LocalCluster } from "../emulator/cluster.ts";
import { untilSignal } from "./signals.ts";

/** `.crdfn/env`: sourceable by a shell and readable by dotenv-style loaders. */
export function envFile(env: Record<string, string>): string {
  return Object.entries(env)
    .map(([k, v]) => `${k}=${v}`)
    .join("\n")
    .concat("\n");
}

/** Writes `.crdfn/kubeconfig` and `.crdfn/env` for people and tools outside this process. */
export function writeStateDir(stateDir: string, cluster: LocalCluster): { kubeconfig: string; env: string } {
  mkdirSync(stateDir, { recursive: true });
  const kubeconfig = join(stateDir, "kubeconfig");
  const env = join(stateDir, "env");
  writeFileSync(kubeconfig, readFileSync(cluster.kubeconfigPath), { mode: 0o600 });
  writeFileSync(env, envFile({ ...cluster.env, KUBECONFIG: resolve(kubeconfig) }), { mode: 0o600 });
  return { kubeconfig, env };
}

export function clusterCommand(): Command {
  const cluster = new Command("cluster")
    .description("a local Kubernetes control plane and SQS queue")
    .addHelpText("after", "\nExamples:\n  $ crdfn cluster up");
  cluster
    .command("up")
    .description(
      "start etcd, kube-apiserver, kube-controller-manager and ElasticMQ on loopback in the foreground; " +
        "write .crdfn/kubeconfig and .crdfn/env; Ctrl-C stops everything",
    )
    .option("--state-dir <dir>", "where to write kubeconfig and env", ".crdfn")
    .option("--no-controller-manager", "skip kube-controller-manager (no garbage collection)")
    .addHelpText(
      "after",
      "\nExamples:\n  $ crdfn cluster up                       # then, in another terminal:\n" +
        "  $ kubectl --kubeconfig .crdfn/kubeconfig get ns\n  $ crdfn cluster up --state-dir /tmp/crdfn --no-controller-manager",
    )
    .action(async (o: { stateDir: string; controllerManager: boolean }) => {
      const t0 = Date.now();
      const c = await startCluster({ controllerManager: o.controllerManager });
      const files = writeStateDir(o.stateDir, c);
      console.error(
        [
          `crdfn cluster ready in ${((Date.now() - t0) / 1000).toFixed(1)}s`,
          `  kube-apiserver  ${c.server}`,
          `  SQS endpoint    ${c.sqs.endpoint}  (queue ${c.sqs.queues.fifo})`,
          `  kubeconfig      ${files.kubeconfig}`,
          `  environment     ${files.env}`,
          ``,
          `next:  kubectl --kubeconfig ${files.kubeconfig} get ns`,
          `       set -a; . ${files.env}; set +a   # point the AWS SDK and kubectl at it`,
          `Ctrl-C stops everything.`,
        ].join("\n"),
      );
      await untilSignal();
      console.error("stopping…");
      await c.stop();
      console.error("stopped");
    });
  return cluster;
}
