// `crdfn cluster up`: a local control plane and queue in the foreground, its state dir written
// (cli/local/state-dir.ts) for kubectl, the bridge and the functions started by hand.
import { join } from "node:path";
import { Command } from "commander";
import { clusterIdSchema } from "../core/event.ts";
import { parseSettings } from "../core/config-error.ts";
import { startCluster } from "../emulator/cluster.ts";
import { sharedQueueEndpoint, updateLocalRegistry, writeStateDir } from "./local/state-dir.ts";
import { untilSignal } from "./signals.ts";

/** `crdfn cluster` and its one subcommand, `up`. */
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
    .option(
      "--name <id>",
      "start an additional cluster with this id: state in <state-dir>/<id>/, CRDFN_CLUSTER=<id> in its env, the first cluster's queue when it is up, " +
        "and an entry in <state-dir>/clusters.json (the functions' CRDFN_CLUSTERS_FILE)",
    )
    .option("--no-controller-manager", "skip kube-controller-manager (no garbage collection)")
    .addHelpText(
      "after",
      "\nExamples:\n  $ crdfn cluster up                       # then, in another terminal:\n" +
        "  $ kubectl --kubeconfig .crdfn/kubeconfig get ns\n  $ crdfn cluster up --name b              # a second cluster sharing the first one's queue\n  $ crdfn cluster up --state-dir /tmp/crdfn --no-controller-manager",
    )
    .action(async (o: { stateDir: string; name?: string; controllerManager: boolean }) => {
      const t0 = Date.now();
      const name = o.name;
      if (name !== undefined) parseSettings(clusterIdSchema, name, "invalid option --name: ", "");
      const shared = name ? await sharedQueueEndpoint(o.stateDir) : undefined;
      if (name && !shared) console.error(`no running queue in ${join(o.stateDir, "env")}: cluster ${name} gets its own ElasticMQ`);
      const c = await startCluster({
        controllerManager: o.controllerManager,
        supervise: (line) => console.error(line),
        ...(shared ? { env: { ...process.env, CRDFN_SQS_ENDPOINT: shared } } : {}),
      });
      const files = writeStateDir(name ? join(o.stateDir, name) : o.stateDir, c, name);
      const registry = name ? updateLocalRegistry(o.stateDir, { add: name }) : undefined;
      console.error(
        [
          `crdfn cluster${name ? ` ${name}` : ""} ready in ${((Date.now() - t0) / 1000).toFixed(1)}s`,
          `  kube-apiserver  ${c.server}`,
          `  SQS endpoint    ${c.sqs.endpoint}  (queue ${c.sqs.queues.fifo}${shared ? ", shared with the first cluster" : ""})`,
          `  kubeconfig      ${files.kubeconfig}`,
          `  environment     ${files.env}`,
          ...(registry ? [`  registry        ${registry}  (CRDFN_CLUSTERS_FILE for one function host serving every cluster here)`] : []),
          ``,
          `next:  kubectl --kubeconfig ${files.kubeconfig} get ns`,
          `       set -a; . ${files.env}; set +a   # point the AWS SDK and kubectl at it`,
          ...(name ? [`       (set -a; . ${files.env}; crdfn bridge)   # this cluster's bridge, publishing events named "${name}"`] : []),
          `Ctrl-C stops everything.`,
        ].join("\n"),
      );
      await untilSignal();
      console.error("stopping…");
      if (name) updateLocalRegistry(o.stateDir, { remove: name });
      await c.stop();
      console.error("stopped");
    });
  return cluster;
}
