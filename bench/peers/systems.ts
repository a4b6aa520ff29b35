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

export const SYSTEMS = ["crdfn", "controller-runtime(1)", "controller-runtime(8)", "kopf(default)", "kopf(tuned)"] as const;
export type SystemName = (typeof SYSTEMS)[number];

/** The parts of a LocalCluster a pipeline uses, as crdfn-child.ts receives them. */
export type ClusterHandle = Pick<LocalCluster, "kubeconfigPath" | "server" | "kubectl" | "caPath" | "sqs" | "env">;
export const CLUSTER_ENV = "CRDFN_PEERS_CLUSTER";
/** The namespace the crdfn child serves, as each peer serves one. */
export const NAMESPACE_ENV = "CRDFN_PEERS_NAMESPACE";
/** bench:platform: how many of its Greeting-shaped kinds the crdfn child serves (unset: the example Greeting). */
export const PLATFORM_KINDS_ENV = "CRDFN_PEERS_PLATFORM_KINDS";

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

export const handle = (c: LocalCluster): ClusterHandle => ({ kubeconfigPath: c.kubeconfigPath, server: c.server, kubectl: c.kubectl, caPath: c.caPath, sqs: c.sqs, env: c.env });

export async function startSystem(name: SystemName, namespace: string, cluster: LocalCluster, bin: Binaries, reaper: Reaper): Promise<RunningSystem> {
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
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  });

  if (name === "crdfn") {
    const { server, ...child } = await startCrdfnChild(namespace, cluster, reaper, logFile, env);
    return started(server, {
      ...child,
      settings: { pipeline: "cli/pipeline.ts startPipeline, bridgeProcess: true, default receive loops, as deployed (generated identities and admission policy, one namespace)", operators: ["greeting"] },
    });
  }

  if (name.startsWith("controller-runtime")) {
    const workers = name === "controller-runtime(8)" ? 8 : 1;
    const args = ["--namespace", namespace, "--workers", String(workers), "--qps", "-1", "--burst", "1000"];
    const server = await startServer(
      { name, command: bin.controllerRuntime, args, logFile, env, ready: () => Promise.resolve(jsonLine(logFile, "synced") !== undefined), timeoutMs: 60_000 },
      reaper,
    );
    return started(server, {
      clusterSide: { operator: server.pid },
      offCluster: {},
      settings: { maxConcurrentReconciles: workers, qps: -1, burst: 1000, cache: "typed, one namespace", childWrite: "CreateOrUpdate", statusWrite: "merge patch", synced: jsonLine(logFile, "synced")?.synced },
    });
  }

  const profile = name === "kopf(tuned)" ? "tuned" : "default";
  const server = await startServer(
    {
      name,
      command: bin.kopfPython,
      args: ["-m", "kopf", "run", "--standalone", `--namespace=${namespace}`, ...(profile === "tuned" ? ["--quiet"] : []), kopfOperator],
      cwd: dirname(kopfOperator),
      logFile,
      env: { ...env, CRDFN_KOPF_PROFILE: profile, PYTHONUNBUFFERED: "1" },
      ready: () => Promise.resolve(jsonLine(logFile, "settings") !== undefined),
      timeoutMs: 60_000,
    },
    reaper,
  );
  const reported = jsonLine(logFile, "settings")?.settings as Record<string, unknown> | undefined;
  return started(server, {
    clusterSide: { operator: server.pid },
    offCluster: {},
    settings: { ...reported, cli: ["--standalone", "--namespace", ...(profile === "tuned" ? ["--quiet"] : [])] },
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
): Promise<{ server: RunningServer } & Pick<RunningSystem, "clusterSide" | "offCluster" | "bridgeMetricsUrl" | "queueRequestsUrl">> {
  const server = await startServer(
    {
      name: "crdfn",
      command: process.execPath,
      args: ["--conditions=crdfn-source", join(packageRoot, "bench", "peers", "crdfn-child.ts")],
      logFile,
      env: { ...env, [CLUSTER_ENV]: JSON.stringify(handle(cluster)), [NAMESPACE_ENV]: namespace, ...(platformKinds > 0 ? { [PLATFORM_KINDS_ENV]: String(platformKinds) } : {}) },
      ready: () => Promise.resolve(jsonLine(logFile, "bridgePid") !== undefined),
      timeoutMs: 120_000,
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
