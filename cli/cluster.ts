import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { Command } from "commander";
import { clusterIdSchema } from "../core/event.ts";
import { parseSettings } from "../core/config-error.ts";
import { startCluster, type LocalCluster } from "../emulator/cluster.ts";
import { readEnvFile } from "./settings.ts";
import { untilSignal } from "./signals.ts";

/** `.crdfn/env`: sourceable by a shell and readable by dotenv-style loaders. */
export function envFile(env: Record<string, string>): string {
  return Object.entries(env)
    .map(([k, v]) => `${k}=${v}`)
    .join("\n")
    .concat("\n");
}

/**
 * Writes `.crdfn/kubeconfig` and `.crdfn/env` for people and tools outside this process. With a
 * cluster `name`, the env also names it (CRDFN_CLUSTER, read by both the bridge and the functions).
 */
export function writeStateDir(stateDir: string, cluster: LocalCluster, name?: string): { kubeconfig: string; env: string } {
  mkdirSync(stateDir, { recursive: true });
  const kubeconfig = join(stateDir, "kubeconfig");
  const env = join(stateDir, "env");
  writeFileSync(kubeconfig, readFileSync(cluster.kubeconfigPath), { mode: 0o600 });
  writeFileSync(env, envFile({ ...cluster.env, KUBECONFIG: resolve(kubeconfig), ...(name ? { CRDFN_CLUSTER: name } : {}) }), { mode: 0o600 });
  return { kubeconfig, env };
}

/**
 * `.crdfn/clusters.json`: the functions' cluster registry (CRDFN_CLUSTERS_FILE) for every local
 * cluster under this state dir — the first one (`.crdfn/kubeconfig`, named by its env's
 * CRDFN_CLUSTER, else "default") and each `--name`d one — so one function host serves them all.
 */
export function updateLocalRegistry(stateDir: string, change: { add?: string; remove?: string }): string {
  const file = join(stateDir, "clusters.json");
  const registry = (existsSync(file) ? JSON.parse(readFileSync(file, "utf8")) : {}) as Record<string, unknown>;
  const primaryEnv = join(stateDir, "env");
  if (existsSync(join(stateDir, "kubeconfig")) && existsSync(primaryEnv)) {
    registry[readEnvFile(primaryEnv).CRDFN_CLUSTER ?? "default"] = { auth: "kubeconfig", kubeconfig: resolve(stateDir, "kubeconfig") };
  }
  if (change.add) registry[change.add] = { auth: "kubeconfig", kubeconfig: resolve(stateDir, change.add, "kubeconfig") };
  if (change.remove) delete registry[change.remove];
  writeFileSync(file, `${JSON.stringify(registry, null, 2)}\n`, { mode: 0o600 });
  return file;
}

/** The SQS endpoint of the first cluster under `stateDir`, when it is up: the fleet's queue. */
async function sharedQueueEndpoint(stateDir: string): Promise<string | undefined> {
  const file = join(stateDir, "env");
  const endpoint = existsSync(file) ? readEnvFile(file).AWS_ENDPOINT_URL_SQS : undefined;
  if (!endpoint) return undefined;
  try {
    await fetch(endpoint, { signal: AbortSignal.timeout(2000) });
    return endpoint;
  } catch {
    return undefined;
  }
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
