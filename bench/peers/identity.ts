// A peer operator runs as it is deployed: under its own ServiceAccount, bound to the ClusterRole its
// project generates (kubebuilder's `make manifests` from the reconciler's RBAC markers; kopf's
// documented RBAC), not as the cluster's admin. The admin's requests skip RBAC (system:masters is
// allowed before any rule is read) and API Priority and Fairness (the exempt level); crdfn's
// bridge and functions always run under their generated identities, so a peer run as the admin
// was spared a per-request cost that crdfn pays.
import { execFile } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { stringify } from "yaml";
import type { Reaper } from "../../emulator/reaper.ts";
import type { LocalCluster } from "../../emulator/types.ts";

const run = promisify(execFile);

/** Where the peers' ServiceAccounts live, as an operator's own `<project>-system` namespace. */
export const PEERS_NAMESPACE = "crdfn-peers";

/** A benchmark outlives any token it could renew mid-run; a day covers the longest (100k cold start). */
const TOKEN_DURATION = "24h";

interface Rule {
  apiGroups: string[];
  resources: string[];
  verbs: string[];
}

/** The kind a peer reconciles and the child kind it owns (always ConfigMaps here). */
export interface PeerResource {
  group: string;
  plural: string;
}

/**
 * What `make manifests` writes for a kubebuilder reconciler of `r` that owns ConfigMaps: the
 * three markers `kubebuilder create api` scaffolds for the kind, and one for the child.
 */
export function kubebuilderRules(r: PeerResource): Rule[] {
  return [
    { apiGroups: [""], resources: ["configmaps"], verbs: ["create", "delete", "get", "list", "patch", "update", "watch"] },
    { apiGroups: [r.group], resources: [r.plural], verbs: ["create", "delete", "get", "list", "patch", "update", "watch"] },
    { apiGroups: [r.group], resources: [`${r.plural}/finalizers`], verbs: ["update"] },
    { apiGroups: [r.group], resources: [`${r.plural}/status`], verbs: ["get", "patch", "update"] },
  ];
}

/**
 * kopf's documented RBAC (docs "Deployment": scanning resources, posting events, handling the
 * kind) for `r`, less the peering (the peer runs `--standalone`), plus the ConfigMaps it writes.
 */
export function kopfRules(r: PeerResource): Rule[] {
  return [
    { apiGroups: ["apiextensions.k8s.io"], resources: ["customresourcedefinitions"], verbs: ["list", "watch"] },
    { apiGroups: [""], resources: ["namespaces"], verbs: ["list", "watch"] },
    { apiGroups: ["", "events.k8s.io"], resources: ["events"], verbs: ["create"] },
    { apiGroups: [r.group], resources: [r.plural], verbs: ["list", "watch", "patch"] },
    { apiGroups: [r.group], resources: [`${r.plural}/status`], verbs: ["patch"] },
    { apiGroups: [""], resources: ["configmaps"], verbs: ["create", "get", "patch"] },
  ];
}

export interface PeerIdentity {
  /** A kubeconfig holding only the ServiceAccount's token: point the peer's KUBECONFIG here. */
  kubeconfigPath: string;
  /** As the API server names the peer's requests. */
  username: string;
  /** For the run's settings. */
  describe: string;
}

type Admin = Pick<LocalCluster, "kubeconfigPath" | "kubectl">;

/** Server-side applies `manifests` as the cluster's admin. */
export async function applyAsAdmin(cluster: Admin, manifests: readonly object[]): Promise<void> {
  const applied = run(cluster.kubectl, ["apply", "--server-side", "--field-manager=crdfn-bench", "-f", "-"], {
    env: { ...process.env, KUBECONFIG: cluster.kubeconfigPath },
  });
  applied.child.stdin?.end(manifests.map((m) => stringify(m)).join("---\n"));
  await applied;
}

/** A token of ServiceAccount `namespace/name`, good for the longest benchmark. */
export async function serviceAccountToken(cluster: Admin, name: string, namespace: string): Promise<string> {
  const { stdout } = await run(cluster.kubectl, ["create", "token", name, "-n", namespace, `--duration=${TOKEN_DURATION}`], {
    env: { ...process.env, KUBECONFIG: cluster.kubeconfigPath },
  });
  return stdout.trim();
}

/**
 * Creates (or updates) ServiceAccount `name` in `namespace`, its ClusterRole `<name>-manager` with `rules` and
 * the binding, and writes a kubeconfig with a token for it, in a folder `reaper` removes.
 */
export async function peerIdentity(
  cluster: Pick<LocalCluster, "kubeconfigPath" | "server" | "kubectl" | "caPath">,
  name: string,
  rules: Rule[],
  reaper: Reaper,
  namespace = PEERS_NAMESPACE,
): Promise<PeerIdentity> {
  const role = `${name}-manager`;
  const manifests = [
    { apiVersion: "v1", kind: "Namespace", metadata: { name: namespace } },
    { apiVersion: "v1", kind: "ServiceAccount", metadata: { name, namespace } },
    { apiVersion: "rbac.authorization.k8s.io/v1", kind: "ClusterRole", metadata: { name: role }, rules },
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRoleBinding",
      metadata: { name: role },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: role },
      subjects: [{ kind: "ServiceAccount", name, namespace }],
    },
  ];
  await applyAsAdmin(cluster, manifests);
  const token = await serviceAccountToken(cluster, name, namespace);
  const dir = mkdtempSync(join(tmpdir(), "crdfn-peer-identity-"));
  reaper.trackDir(dir);
  const kubeconfigPath = join(dir, "kubeconfig");
  const config = {
    apiVersion: "v1",
    kind: "Config",
    clusters: [{ name: "bench", cluster: { server: cluster.server, "certificate-authority": cluster.caPath } }],
    users: [{ name, user: { token } }],
    contexts: [{ name, context: { cluster: "bench", user: name } }],
    "current-context": name,
  };
  writeFileSync(kubeconfigPath, stringify(config), { mode: 0o600 });
  const username = `system:serviceaccount:${namespace}:${name}`;
  return { kubeconfigPath, username, describe: `ServiceAccount ${namespace}/${name}, ClusterRole ${role} (${rules.length} rules)` };
}
