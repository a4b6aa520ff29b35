// A test's access to the API server from a function's single-cluster settings (CRDFN_KUBE_AUTH
// and friends), as the function builds it for the one entry of its cluster registry.
import type { KubeAccess } from "../../clients/kube-http.ts";
import { singleClusterEntry } from "../../functions/clusters/registry.ts";
import { clusterAccess, type AccessDeps } from "../../functions/credentials/access.ts";
import type { FunctionConfig } from "../../functions/runtime/config.ts";

export function apiAccess(config: FunctionConfig, deps: AccessDeps): Promise<KubeAccess> {
  return clusterAccess(singleClusterEntry(config), deps);
}
