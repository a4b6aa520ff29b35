// bench:platform's two systems, each serving every kind in one namespace: crdfn as one project
// (one bridge process for all the kinds; its poller and functions off-cluster, in crdfn-child's
// process), or one controller-runtime operator process per kind, as a platform team running ten
// kubebuilder operators has. Each is a set of named processes the run can measure and stop.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startServer } from "../../emulator/process.ts";
import type { Reaper } from "../../emulator/reaper.ts";
import type { LocalCluster } from "../../emulator/types.ts";
import { kubebuilderRules, peerIdentity } from "../peers/identity.ts";
import { jsonLine, startCrdfnChild } from "../peers/systems.ts";
import type { PlatformKind } from "./kinds.ts";

export const PLATFORM_SYSTEMS = ["crdfn", "controller-runtime"] as const;
export type PlatformSystem = (typeof PLATFORM_SYSTEMS)[number];

export interface RunningPlatform {
  /** What runs in the cluster in production: the bridge, or the ten operators (op0…op9). */
  clusterSide: Record<string, number>;
  /** What runs elsewhere: crdfn's poller and functions (ElasticMQ is added by the run). */
  offCluster: Record<string, number>;
  settings: Record<string, unknown>;
  bridgeMetricsUrl?: string;
  queueRequestsUrl?: string;
  /** Seconds from spawn to ready (crdfn: the bridge's initial sync; the operators: the last one's informers synced). */
  startSeconds: number;
  logDir: string;
  stop(): Promise<void>;
}

/** The controller-runtime flags that point one operator process at one kind (see controller-runtime/main.go). */
export function operatorArgs(k: PlatformKind, namespace: string): string[] {
  return [
    "--namespace",
    namespace,
    "--group",
    k.group,
    "--version",
    k.version,
    "--kind",
    k.kind,
    "--child-label",
    k.childLabel,
    "--cache-children-by-label",
    "--workers",
    "1",
    "--qps",
    "-1",
    "--burst",
    "1000",
  ];
}

export async function startPlatform(
  system: PlatformSystem,
  kinds: readonly PlatformKind[],
  namespace: string,
  cluster: LocalCluster,
  controllerRuntime: string,
  reaper: Reaper,
  /** crdfn only: CPU-profile the bridge and the function process into this folder, written at stop; settings for both as environment variables (tracing's). */
  crdfn: { cpuProfileDir?: string; env?: Record<string, string> } = {},
): Promise<RunningPlatform> {
  const { cpuProfileDir } = crdfn;
  const logDir = mkdtempSync(join(tmpdir(), "crdfn-platform-"));
  reaper.trackDir(logDir);
  const env = { ...process.env, KUBECONFIG: cluster.kubeconfigPath };
  const t0 = performance.now();
  const since = () => Math.round(performance.now() - t0) / 1000;

  if (system === "crdfn") {
    const { server, ...child } = await startCrdfnChild(namespace, cluster, reaper, join(logDir, "crdfn.log"), env, kinds.length, {
      ...(cpuProfileDir === undefined ? {} : { cpuProfileDir }),
      ...(crdfn.env === undefined ? {} : { env: crdfn.env }),
    });
    return {
      ...child,
      startSeconds: since(),
      logDir,
      settings: {
        pipeline:
          "cli/local/pipeline.ts startPipeline, bridgeProcess: true, default receive loops, as deployed (generated identities and admission policies, one namespace)",
        operators: kinds.map((k) => k.kind),
        traced: crdfn.env !== undefined,
      },
      async stop() {
        // A profiled process writes its profile as it exits: more time before SIGKILL.
        await server.stop(cpuProfileDir === undefined ? undefined : 60_000);
        rmSync(logDir, { recursive: true, force: true });
      },
    };
  }

  // Ten kubebuilder projects: each its own ServiceAccount and generated ClusterRole.
  const identities = await Promise.all(kinds.map((k) => peerIdentity(cluster, `controller-runtime-${k.plural}`, kubebuilderRules(k), reaper)));
  const servers = await Promise.all(
    kinds.map((k, i) => {
      const logFile = join(logDir, `${k.plural}.log`);
      return startServer(
        {
          name: `controller-runtime ${k.kind}`,
          command: controllerRuntime,
          args: operatorArgs(k, namespace),
          logFile,
          env: { ...env, KUBECONFIG: identities[i]!.kubeconfigPath },
          ready: () => Promise.resolve(jsonLine(logFile, "synced") !== undefined),
          timeoutMs: 120_000,
        },
        reaper,
      ).then((server) => [`op${i}`, server] as const);
    }),
  );
  return {
    clusterSide: Object.fromEntries(servers.map(([name, s]) => [name, s.pid])),
    offCluster: {},
    startSeconds: since(),
    logDir,
    settings: {
      processes: kinds.length,
      identity: identities[0]?.describe ?? "",
      args: operatorArgs(kinds[0] ?? { group: "…", version: "…", kind: "…", plural: "…", childLabel: "…", prefix: "…" }, namespace),
      maxConcurrentReconciles: 1,
      cache: "typed, one namespace; ConfigMaps only with the kind's label",
      childWrite: "CreateOrUpdate",
      statusWrite: "merge patch",
    },
    async stop() {
      await Promise.all(servers.map(([, s]) => s.stop()));
      rmSync(logDir, { recursive: true, force: true });
    },
  };
}
