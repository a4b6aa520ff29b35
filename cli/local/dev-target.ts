// Where `crdfn dev` runs the pipeline: a control plane it starts itself, or a cluster that
// already exists (any kubeconfig and context; kind's). Each comes with its queue (ElasticMQ for
// the Lambda target, the Pub/Sub emulator for the Cloud Run target), and says whether crdfn dev
// owns the cluster (and may stop it and fill it with samples) or not.
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { KubeConfig, VersionApi } from "@kubernetes/client-node";
import { startCluster, type SqsEnvironment } from "../../emulator/cluster.ts";
import { SetupError } from "../../emulator/errors.ts";
import { startLocalQueue } from "../../emulator/queue.ts";
import { startLocalPubSub, type LocalPubSub } from "../../emulator/pubsub.ts";
import { envFile } from "../environment.ts";
import { writeStateDir } from "./state-dir.ts";
import type { PipelineCluster } from "./pipeline.ts";

/** Where the functions run: AWS Lambda's target (SQS FIFO) or Cloud Run's (Pub/Sub, push). */
export type FunctionTarget = "lambda" | "cloudrun";

export interface DevTarget {
  cluster: PipelineCluster;
  /** The Lambda target's queue. */
  queue?: SqsEnvironment;
  /** The Cloud Run target's Pub/Sub emulator. */
  pubsub?: LocalPubSub;
  /** The kubeconfig and env files written into the state dir, for people and `crdfn status`. */
  files: { kubeconfig: string; env: string };
  /** Whether this process started the control plane (false: someone else's cluster). */
  ownsCluster: boolean;
  /** Stops what this process started: never the existing cluster. */
  stop(): Promise<void>;
}

export const KIND_CLUSTER = "crdfn";
export const KIND_CONTEXT = `kind-${KIND_CLUSTER}`;

/** What the Cloud Run target needs besides the emulator: `.crdfn/env` names it for `crdfn status` / `crdfn dlq`. */
export interface PubSubTargetOptions {
  /** Extra lines for `.crdfn/env` (the operators' resource prefix and names). */
  env: Record<string, string>;
}

/** The embedded control plane and queue, started here and stopped with crdfn dev. */
export async function startedTarget(
  stateDir: string,
  say: (line: string) => void,
  pubsubTarget?: PubSubTargetOptions,
  tracing: { tracingEndpoint?: string } = {},
): Promise<DevTarget> {
  if (pubsubTarget) {
    // No ElasticMQ: the Cloud Run target's queue is the Pub/Sub emulator.
    const [cluster, pubsub] = await Promise.all([startCluster({ log: say, queue: false, supervise: say, ...tracing }), startLocalPubSub({ log: say })]);
    const stop = async () => {
      await pubsub.stop();
      await cluster.stop();
    };
    try {
      const files = writeStateDir(stateDir, cluster);
      writeFileSync(files.env, envFile({ KUBECONFIG: resolve(files.kubeconfig), ...pubsub.env, ...pubsubTarget.env }), { mode: 0o600 });
      return { cluster, pubsub, files, ownsCluster: true, stop };
    } catch (e) {
      await stop();
      throw e;
    }
  }
  const cluster = await startCluster({ log: say, supervise: say, ...tracing });
  try {
    return { cluster, queue: cluster.sqs, files: writeStateDir(stateDir, cluster), ownsCluster: true, stop: () => cluster.stop() };
  } catch (e) {
    await cluster.stop();
    throw e;
  }
}

/**
 * crdfn dev serves exactly the cluster it runs against (its functions get CRDFN_CLUSTER): a
 * cluster registry in the environment, well-formed or not, is refused before anything starts,
 * naming the variable that is set.
 */
export function refuseClusterRegistry(env: NodeJS.ProcessEnv = process.env): void {
  const set = ["CRDFN_CLUSTERS", "CRDFN_CLUSTERS_FILE"].find((k) => env[k] !== undefined);
  if (set)
    throw new SetupError(
      `${set} is set, but crdfn dev serves only the cluster it runs against; unset ${set} (a function host serving several clusters takes it)`,
    );
}

const firstLine = (e: unknown) => (e instanceof Error ? e.message : String(e)).split("\n")[0];

/**
 * An existing cluster, reached through a kubeconfig (and context); only the queue is started
 * here. The chosen context is written as the current one into the state dir's kubeconfig, which
 * the functions and `crdfn status` read.
 */
export async function existingTarget(o: {
  kubeconfig: string;
  context?: string;
  stateDir: string;
  say: (line: string) => void;
  pubsub?: PubSubTargetOptions;
}): Promise<DevTarget> {
  if (!existsSync(o.kubeconfig)) throw new SetupError(`--kubeconfig ${o.kubeconfig}: no such file`);
  const kubeConfig = new KubeConfig();
  try {
    kubeConfig.loadFromFile(o.kubeconfig);
  } catch (e) {
    throw new SetupError(`--kubeconfig ${o.kubeconfig}: not a kubeconfig (${firstLine(e)})`);
  }
  if (o.context) {
    if (!kubeConfig.getContextObject(o.context)) {
      const names = kubeConfig.getContexts().map((c) => c.name);
      throw new SetupError(`--context ${o.context}: no such context in ${o.kubeconfig} (it has: ${names.join(", ") || "none"})`);
    }
    kubeConfig.setCurrentContext(o.context);
  }
  const server = kubeConfig.getCurrentCluster()?.server;
  if (!server) throw new SetupError(`--kubeconfig ${o.kubeconfig}: no current context; name one with --context`);
  try {
    await kubeConfig.makeApiClient(VersionApi).getCode();
  } catch (e) {
    throw new SetupError(`cannot reach the API server ${server} (context ${kubeConfig.getCurrentContext()}): ${firstLine(e)}`);
  }

  mkdirSync(o.stateDir, { recursive: true });
  // Never overwrite the user's own file (say --state-dir ~/.kube).
  let kubeconfigPath = resolve(o.stateDir, "kubeconfig");
  if (kubeconfigPath === resolve(o.kubeconfig)) kubeconfigPath = resolve(o.stateDir, `kubeconfig-${kubeConfig.getCurrentContext()}`);
  writeFileSync(kubeconfigPath, kubeConfig.exportConfig(), { mode: 0o600 });

  const env = join(o.stateDir, "env");
  const files = { kubeconfig: kubeconfigPath, env };
  const using = `using the cluster at ${server} (context ${kubeConfig.getCurrentContext()}); it is left as it is when crdfn dev stops`;
  if (o.pubsub) {
    const pubsub = await startLocalPubSub({ log: o.say });
    writeFileSync(env, envFile({ KUBECONFIG: kubeconfigPath, ...pubsub.env, ...o.pubsub.env }), { mode: 0o600 });
    o.say(using);
    return { cluster: { kubeConfig, kubeconfigPath }, pubsub, files, ownsCluster: false, stop: () => pubsub.stop() };
  }
  const queue = await startLocalQueue({ log: o.say });
  writeFileSync(env, envFile({ KUBECONFIG: kubeconfigPath, ...queue.env }), { mode: 0o600 });
  o.say(using);
  return {
    cluster: { kubeConfig, kubeconfigPath },
    queue: queue.sqs,
    files,
    ownsCluster: false,
    stop: () => queue.stop(),
  };
}

/**
 * `--kind`: the kubeconfig of the kind cluster named KIND_CLUSTER (created by the user with
 * infra/kind/cluster.yaml), written into the state dir. Where kind or a Docker engine is
 * missing, one line that points at --kubeconfig.
 */
export function kindKubeconfig(stateDir: string, env: NodeJS.ProcessEnv = process.env): string {
  const elsewhere = `run crdfn dev --kubeconfig <file> [--context <name>] against any cluster instead`;
  if (spawnSync("kind", ["version"], { env, encoding: "utf8" }).error) throw new SetupError(`--kind: kind is not installed; ${elsewhere}`);
  const docker = spawnSync("docker", ["info", "--format", "{{.ServerVersion}}"], { env, encoding: "utf8" });
  if (docker.error || docker.status !== 0) throw new SetupError(`--kind: no Docker engine answers (docker info failed); ${elsewhere}`);
  const got = spawnSync("kind", ["get", "kubeconfig", "--name", KIND_CLUSTER], { env, encoding: "utf8" });
  if (got.status !== 0) {
    throw new SetupError(`--kind: no kind cluster "${KIND_CLUSTER}" (kind create cluster --config infra/kind/cluster.yaml); or ${elsewhere}`);
  }
  mkdirSync(stateDir, { recursive: true });
  const file = join(stateDir, "kind-kubeconfig");
  writeFileSync(file, got.stdout, { mode: 0o600 });
  return file;
}
