// The CronTab fixture the bridge tests watch: its CRD, namespaces, objects and their paths.
import type { LocalCluster } from "../../emulator/types.ts";
import { kube, kubectl, ok } from "./kube-requests.ts";

export const CRONTABS = "/apis/stable.example.com/v1";
export const CRONTAB_RESOURCE = "stable.example.com/v1/crontabs>batch/v1/cronjobs";

export function installCrontabCrd(cluster: LocalCluster): void {
  kubectl(cluster, "apply", "--server-side", "-f", "infra/generated/crds/crontabs.stable.example.com.yaml");
  kubectl(cluster, "wait", "--for=condition=Established", "--timeout=30s", "crd/crontabs.stable.example.com");
}

export async function createNamespace(cluster: LocalCluster, name: string): Promise<void> {
  await ok(kube(cluster.kubeConfig, "POST", "/api/v1/namespaces", { apiVersion: "v1", kind: "Namespace", metadata: { name } }), `namespace ${name}`);
}

/** A namespace other files may share or have made already (crdfn-system on a shared control plane). */
export async function ensureNamespace(cluster: LocalCluster, name: string): Promise<void> {
  const r = await kube(cluster.kubeConfig, "POST", "/api/v1/namespaces", { apiVersion: "v1", kind: "Namespace", metadata: { name } });
  if (r.status >= 300 && r.status !== 409) throw new Error(`namespace ${name}: HTTP ${r.status} ${JSON.stringify(r.body).slice(0, 300)}`);
}

export function crontab(name: string, replicas = 1): unknown {
  return { apiVersion: "stable.example.com/v1", kind: "CronTab", metadata: { name }, spec: { cronSpec: "*/5 * * * *", image: "busybox", replicas } };
}

export const crontabPath = (ns: string, name?: string): string => `${CRONTABS}/namespaces/${ns}/crontabs${name === undefined ? "" : `/${name}`}`;
