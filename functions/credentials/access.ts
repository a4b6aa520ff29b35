// How a function reaches the API server, chosen by CRDFN_KUBE_AUTH: a kubeconfig file, the
// in-cluster ServiceAccount, a bearer token (env or a rotating file), or an EKS IAM token.
import { readFile } from "node:fs/promises";
import { KubeConfig } from "@kubernetes/client-node";
import type { AwsCredentialIdentityProvider } from "@smithy/types";
import type { FunctionConfig } from "../runtime/config.ts";
import type { KubeAccess } from "../../clients/kube-http.ts";
import { eksTokenProvider } from "./eks-token.ts";

/** Re-read a token file this often: projected ServiceAccount tokens rotate underneath us. */
const TOKEN_FILE_TTL_MS = 60_000;

export interface AccessDeps {
  clock: () => Date;
  /** The AWS credential chain (eks mode only); the entry builds it. */
  awsCredentials?: () => AwsCredentialIdentityProvider;
  /** Where the ServiceAccount files are mounted, below this root (tests); default "/". */
  serviceAccountRoot?: string;
}

export function apiAccess(config: FunctionConfig, deps: AccessDeps): KubeAccess {
  switch (config.CRDFN_KUBE_AUTH) {
    case "kubeconfig": {
      const kubeConfig = new KubeConfig();
      if (config.KUBECONFIG) kubeConfig.loadFromFile(config.KUBECONFIG);
      else kubeConfig.loadFromDefault();
      return { kubeConfig };
    }
    case "in-cluster": {
      const kubeConfig = new KubeConfig();
      kubeConfig.loadFromCluster(deps.serviceAccountRoot?.replace(/\/$/, "") ?? "");
      return { kubeConfig };
    }
    case "token": {
      const token = config.CRDFN_KUBE_TOKEN;
      const file = config.CRDFN_KUBE_TOKEN_FILE;
      return { kubeConfig: serverOnly(config), token: token !== undefined ? () => Promise.resolve(token) : tokenFile(file ?? "", deps.clock) };
    }
    case "eks": {
      if (!deps.awsCredentials) throw new Error("eks authentication needs the AWS credential chain");
      return {
        kubeConfig: serverOnly(config),
        token: eksTokenProvider({ clusterName: config.CRDFN_EKS_CLUSTER ?? "", region: config.AWS_REGION ?? "", credentials: deps.awsCredentials(), clock: deps.clock }),
      };
    }
  }
}

/** A kubeconfig naming only the server and its CA; the token provider authenticates. */
function serverOnly(config: FunctionConfig): KubeConfig {
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromClusterAndUser(
    {
      name: "crdfn",
      server: config.CRDFN_KUBE_SERVER ?? "",
      skipTLSVerify: false,
      ...(config.CRDFN_KUBE_CA_FILE ? { caFile: config.CRDFN_KUBE_CA_FILE } : {}),
      ...(config.CRDFN_KUBE_CA_DATA ? { caData: config.CRDFN_KUBE_CA_DATA } : {}),
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
