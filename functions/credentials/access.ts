// How a function reaches one cluster's API server, chosen by its registry entry's `auth`: a
// kubeconfig file (and context), the in-cluster ServiceAccount, a bearer token (inline or a
// rotating file), or an EKS IAM token.
import { readFile } from "node:fs/promises";
import { KubeConfig } from "@kubernetes/client-node";
import type { AwsCredentialIdentityProvider } from "@smithy/types";
import type { ClusterEntry } from "../clusters/registry.ts";
import { singleClusterEntry } from "../clusters/registry.ts";
import type { FunctionConfig } from "../runtime/config.ts";
import type { KubeAccess } from "../../clients/kube-http.ts";
import { eksTokenProvider } from "./eks-token.ts";

/** Re-read a token file this often: projected ServiceAccount tokens rotate underneath us. */
const TOKEN_FILE_TTL_MS = 60_000;

export interface AccessDeps {
  clock: () => Date;
  /** The AWS credential chain (eks mode only); the entry builds it. */
  awsCredentials?: () => AwsCredentialIdentityProvider;
  /** eks entries without a region of their own sign for this one (AWS_REGION). */
  region?: string;
  /** Where the ServiceAccount files are mounted, below this root (tests); default "/". */
  serviceAccountRoot?: string;
}

/** The single-cluster settings' access (CRDFN_KUBE_AUTH and friends). */
export function apiAccess(config: FunctionConfig, deps: AccessDeps): KubeAccess {
  return clusterAccess(singleClusterEntry(config), deps);
}

/** Each call builds fresh token caches: call once per cluster and keep the result. */
export function clusterAccess(entry: ClusterEntry, deps: AccessDeps): KubeAccess {
  switch (entry.auth) {
    case "kubeconfig": {
      const kubeConfig = new KubeConfig();
      if (entry.kubeconfig) kubeConfig.loadFromFile(entry.kubeconfig);
      else kubeConfig.loadFromDefault();
      if (entry.context) kubeConfig.setCurrentContext(entry.context);
      return { kubeConfig };
    }
    case "in-cluster": {
      const kubeConfig = new KubeConfig();
      kubeConfig.loadFromCluster(deps.serviceAccountRoot?.replace(/\/$/, "") ?? "");
      return { kubeConfig };
    }
    case "token": {
      const { token, tokenFile: file } = entry;
      return { kubeConfig: serverOnly(entry), token: token !== undefined ? () => Promise.resolve(token) : tokenFile(file ?? "", deps.clock) };
    }
    case "eks": {
      if (!deps.awsCredentials) throw new Error("eks authentication needs the AWS credential chain");
      return {
        kubeConfig: serverOnly(entry),
        token: eksTokenProvider({ clusterName: entry.eksCluster, region: entry.region ?? deps.region ?? "", credentials: deps.awsCredentials(), clock: deps.clock }),
      };
    }
  }
}

/** A kubeconfig naming only the server and its CA; the token provider authenticates. */
function serverOnly(entry: { server: string; caFile?: string | undefined; caData?: string | undefined }): KubeConfig {
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromClusterAndUser(
    {
      name: "crdfn",
      server: entry.server,
      skipTLSVerify: false,
      ...(entry.caFile ? { caFile: entry.caFile } : {}),
      ...(entry.caData ? { caData: entry.caData } : {}),
    },
    { name: "crdfn" },
  );
  return kubeConfig;
}

function tokenFile(path: string, clock: () => Date): () => Promise<string> {
  let cached: { token: string; at: number } | undefined;
  return async () => {
    const now = clock().getTime();
    if (!cached || now - cached.at >= TOKEN_FILE_TTL_MS) cached = { token: (await readFile(path, "utf8")).trim(), at: now };
    return cached.token;
  };
}
