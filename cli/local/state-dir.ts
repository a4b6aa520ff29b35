// The state directory (`.crdfn/`) a local cluster leaves for people and tools outside the process
// that started it: its kubeconfig, its environment, and the functions' registry of every local
// cluster under it. `crdfn cluster up` and `crdfn dev` write it; the admin commands read it.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import type { LocalCluster } from "../../emulator/cluster.ts";
import { envFile, readEnvFile } from "../environment.ts";

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
export async function sharedQueueEndpoint(stateDir: string): Promise<string | undefined> {
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
