// The systems under comparison, each started against the same cluster for one namespace: crdfn
// (its pipeline in a child process), controller-runtime with 1 and 8 workers, kopf with default
// and tuned settings. Every one is a child process group the benchmark can measure and stop.
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { packageRoot } from "../../emulator/paths.ts";
import { startServer, type RunningServer } from "../../emulator/process.ts";
import type { Reaper } from "../../emulator/reaper.ts";
import type { LocalCluster } from "../../emulator/types.ts";
import { kopfOperator } from "./build.ts";
import { kopfRules, kubebuilderRules, peerIdentity } from "./identity.ts";

export const SYSTEMS = ["crdfn", "controller-runtime(1)", "controller-runtime(8)", "kopf(default)", "kopf(tuned)"] as const;
export type SystemName = (typeof SYSTEMS)[number];

/** The parts of a LocalCluster a pipeline uses, as crdfn-child.ts receives them. */
export type ClusterHandle = Pick<LocalCluster, "kubeconfigPath" | "server" | "kubectl" | "caPath" | "sqs" | "env">;
export const CLUSTER_ENV = "CRDFN_PEERS_CLUSTER";
/** The namespace the crdfn child serves, as each peer serves one. */
export const NAMESPACE_ENV = "CRDFN_PEERS_NAMESPACE";
/** bench:platform: how many of its Greeting-shaped kinds the crdfn child serves (unset: the example Greeting). */
export const PLATFORM_KINDS_ENV = "CRDFN_PEERS_PLATFORM_KINDS";
/** A folder for `--cpu-prof` profiles of crdfn's bridge and function process (bench:coldscale). */
export const PROFILE_DIR_ENV = "CRDFN_PEERS_PROFILE_DIR";
/** V8 flags appended to the bridge's shipped NODE_OPTIONS (deploy/bridge.ts), last wins: a variant's heap sizes. */
export const BRIDGE_NODE_OPTIONS_ENV = "CRDFN_PEERS_BRIDGE_NODE_OPTIONS";
/** The crdfn child's poller: concurrent receive loops (cli/local/pipeline.ts receiveLoops; default its default). */
export const RECEIVE_LOOPS_ENV = "CRDFN_PEERS_RECEIVE_LOOPS";
/** How long the crdfn child's bridge may take to report its initial sync, in ms. */
export const READY_TIMEOUT_ENV = "CRDFN_PEERS_READY_TIMEOUT_MS";

/** Node's flags for a CPU profile written into `dir` at exit, sampled every 10 ms (a 20-minute run stays a few MB). */
export const cpuProfileFlags = (dir: string): string[] => ["--cpu-prof", `--cpu-prof-dir=${dir}`, "--cpu-prof-interval=10000"];

/** How a system is started where the defaults do not fit (bench:coldscale: many objects waiting). */
export interface StartOptions {
  /** Seconds from spawn the system may take to be ready. Default 120 (crdfn) / 60 (peers). */
  readyTimeoutSeconds?: number;
  /** crdfn only: write a CPU profile of the bridge and of the function process here, at stop. */
  cpuProfileDir?: string;
  /** crdfn only: settings for its bridge and functions, as environment variables (a variant's). */
  env?: Record<string, string>;
  /** crdfn only: the checkout to run it from (a variant's: the commit before a change); default this one. */
  root?: string;
}

export interface RunningSystem {
  /** Processes that run in the cluster in production (the bridge; a peer's whole operator). */
  clusterSide: Record<string, number>;
  /** Processes that run elsewhere in production (crdfn's functions and poller; ElasticMQ is added by the runner). */
  offCluster: Record<string, number>;
  /** Settings in force, as the system reported them or as it was started. */
  settings: Record<string, unknown>;
  /** crdfn's bridge /metrics (publish delay), absent for the peers. */
  bridgeMetricsUrl?: string;
  /** crdfn's child's counts so far (JSON): the poller's and functions' requests to the queue by command, reconciles and the ms inside them; absent for the peers. */
  queueRequestsUrl?: string;
  /** Seconds from spawn to ready (the peers: informers synced / kopf started; crdfn: the bridge's initial sync). */
  startSeconds: number;
  logFile: string;
  stop(): Promise<void>;
}

export interface Binaries {
  controllerRuntime: string;
  kopfPython: string;
}

/** The first line of `file` that parses as JSON and has `key`, if any. */
export function jsonLine(file: string, key: string): Record<string, unknown> | undefined {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch {
    return undefined;
  }
  for (const line of text.split("\n")) {
    if (!line.startsWith("{")) continue;
    try {
      const rec = JSON.parse(line) as Record<string, unknown>;
      if (key in rec) return rec;
    } catch {
      // a log line
    }
  }
  return undefined;
}

export const handle = (c: LocalCluster): ClusterHandle => ({
  kubeconfigPath: c.kubeconfigPath,
  server: c.server,
  kubectl: c.kubectl,
  caPath: c.caPath,
  sqs: c.sqs,
  env: c.env,
});

export async function startSystem(
  name: SystemName,
  namespace: string,
  cluster: LocalCluster,
  bin: Binaries,
  reaper: Reaper,
  start: StartOptions = {},
): Promise<RunningSystem> {
  const dir = mkdtempSync(join(tmpdir(), "crdfn-peer-"));
  reaper.trackDir(dir);
  const logFile = join(dir, "system.log");
  const env = { ...process.env, KUBECONFIG: cluster.kubeconfigPath };
  const t0 = performance.now();
  const started = (server: RunningServer, rest: Omit<RunningSystem, "startSeconds" | "logFile" | "stop">): RunningSystem => ({
    ...rest,
    startSeconds: Math.round(performance.now() - t0) / 1000,
    logFile,
    async stop() {
      // A profiled process writes its profile as it exits: more time before SIGKILL.
      await server.stop(start.cpuProfileDir === undefined ? undefined : 60_000);
      rmSync(dir, { recursive: true, force: true });
    },
  });

  const timeoutMs = (fallbackSeconds: number): number => (start.readyTimeoutSeconds ?? fallbackSeconds) * 1000;
  if (name === "crdfn") {
    const { server, ...child } = await startCrdfnChild(namespace, cluster, reaper, logFile, env, 0, start);
    return started(server, {
      ...child,
      settings: {
        pipeline:
          "cli/local/pipeline.ts startPipeline, bridgeProcess: true, default receive loops, as deployed (generated identities and admission policy, one namespace)",
        operators: ["greeting"],
      },
    });
  }

  // The example Greeting, as every peer reconciles it.
  const greeting = { group: "example.com", plural: "greetings" };
  if (name.startsWith("controller-runtime")) {
    const workers = name === "controller-runtime(8)" ? 8 : 1;
    const args = ["--namespace", namespace, "--workers", String(workers), "--qps", "-1", "--burst", "1000"];
    const identity = await peerIdentity(cluster, `controller-runtime-${workers}`, kubebuilderRules(greeting), reaper);
    const server = await startServer(
      {
        name,
        command: bin.controllerRuntime,
        args,
        logFile,
        env: { ...env, KUBECONFIG: identity.kubeconfigPath },
        ready: () => Promise.resolve(jsonLine(logFile, "synced") !== undefined),
        timeoutMs: timeoutMs(60),
      },
      reaper,
    );
    return started(server, {
      clusterSide: { operator: server.pid },
      offCluster: {},
      settings: {
        identity: identity.describe,
        maxConcurrentReconciles: workers,
        qps: -1,
        burst: 1000,
        cache: "typed, one namespace",
        childWrite: "CreateOrUpdate",
        statusWrite: "merge patch",
        synced: jsonLine(logFile, "synced")?.synced,
      },
    });
  }

  const profile = name === "kopf(tuned)" ? "tuned" : "default";
  const identity = await peerIdentity(cluster, `kopf-${profile}`, kopfRules(greeting), reaper);
  const server = await startServer(
    {
      name,
      command: bin.kopfPython,
      args: ["-m", "kopf", "run", "--standalone", `--namespace=${namespace}`, ...(profile === "tuned" ? ["--quiet"] : []), kopfOperator],
      cwd: dirname(kopfOperator),
      logFile,
      env: { ...env, KUBECONFIG: identity.kubeconfigPath, CRDFN_KOPF_PROFILE: profile, PYTHONUNBUFFERED: "1" },
      ready: () => Promise.resolve(jsonLine(logFile, "settings") !== undefined),
      timeoutMs: timeoutMs(60),
    },
    reaper,
  );
  const reported = jsonLine(logFile, "settings")?.settings as Record<string, unknown> | undefined;
  return started(server, {
    clusterSide: { operator: server.pid },
    offCluster: {},
    settings: { ...reported, identity: identity.describe, cli: ["--standalone", "--namespace", ...(profile === "tuned" ? ["--quiet"] : [])] },
  });
}

/**
 * crdfn's pipeline in its child process (crdfn-child.ts) serving `namespace`: the example Greeting,
 * or bench:platform's first `platformKinds` kinds as one project. Its bridge is the cluster side.
 */
export async function startCrdfnChild(
  namespace: string,
  cluster: LocalCluster,
  reaper: Reaper,
  logFile: string,
  env: NodeJS.ProcessEnv,
  platformKinds = 0,
  start: StartOptions = {},
): Promise<{ server: RunningServer } & Pick<RunningSystem, "clusterSide" | "offCluster" | "bridgeMetricsUrl" | "queueRequestsUrl">> {
  const timeoutMs = (start.readyTimeoutSeconds ?? 120) * 1000;
  const profile = start.cpuProfileDir === undefined ? [] : cpuProfileFlags(join(start.cpuProfileDir, "functions"));
  const server = await startServer(
    {
      name: "crdfn",
      command: process.execPath,
      args: ["--conditions=crdfn-source", ...profile, join(start.root ?? packageRoot, "bench", "peers", "crdfn-child.ts")],
      logFile,
      env: {
        ...env,
        [CLUSTER_ENV]: JSON.stringify(handle(cluster)),
        [NAMESPACE_ENV]: namespace,
        ...(platformKinds > 0 ? { [PLATFORM_KINDS_ENV]: String(platformKinds) } : {}),
        ...start.env,
        ...(start.readyTimeoutSeconds === undefined ? {} : { [READY_TIMEOUT_ENV]: String(timeoutMs) }),
        ...(start.cpuProfileDir === undefined ? {} : { [PROFILE_DIR_ENV]: join(start.cpuProfileDir, "bridge") }),
      },
      ready: () => Promise.resolve(jsonLine(logFile, "bridgePid") !== undefined),
      timeoutMs,
    },
    reaper,
  );
  const ready = jsonLine(logFile, "bridgePid") ?? {};
  return {
    server,
    clusterSide: { bridge: Number(ready.bridgePid) },
    offCluster: { functions: server.pid },
    bridgeMetricsUrl: `http://127.0.0.1:${Number(ready.bridgeHttpPort)}/metrics`,
    queueRequestsUrl: `http://127.0.0.1:${Number(ready.queueRequestsPort)}/`,
  };
}
