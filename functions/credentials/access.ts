// How a function reaches one cluster's API server, chosen by its registry entry's `auth`: a
// kubeconfig file (and context), the in-cluster ServiceAccount, a bearer token (inline or a
// rotating file), an EKS IAM token, or a GKE access token (the metadata server's).
import type { AwsCredentialIdentityProvider } from "@smithy/types";
import type { ClusterEntry } from "../clusters/registry.ts";
import type { KubeAccess } from "../../clients/kube-http.ts";
import { inClusterConnection, serverConnection, tokenFromFile } from "../../clients/kube-connection.ts";
import { eksTokenProvider } from "./eks-token.ts";
import { gkeTokenProvider } from "./gke-token.ts";

export interface AccessDeps {
  clock: () => Date;
  /** The AWS credential chain (eks mode only); the entry builds it. */
  awsCredentials?: () => AwsCredentialIdentityProvider;
  /** eks entries without a region of their own sign for this one (AWS_REGION). */
  region?: string;
  /** Where the ServiceAccount files are mounted, below this root (tests); default "/". */
  serviceAccountRoot?: string;
  /** KUBERNETES_SERVICE_HOST/PORT (in-cluster) and KUBECONFIG; default process.env. */
  env?: NodeJS.ProcessEnv;
}

/** Each call builds fresh token caches: call once per cluster and keep the result. */
export async function clusterAccess(entry: ClusterEntry, deps: AccessDeps): Promise<KubeAccess> {
  const env = deps.env ?? process.env;
  switch (entry.auth) {
    case "kubeconfig": {
      // Loaded only here: a Lambda bundle leaves client-node out (cli/esbuild-plugins.ts).
      const { loadKubeconfig } = await import("../../clients/kubeconfig.ts");
      return { connection: loadKubeconfig(entry.kubeconfig, entry.context, env).kubeConfig };
    }
    case "in-cluster":
      return { connection: inClusterConnection(env, deps.clock, deps.serviceAccountRoot?.replace(/\/$/, "") ?? "") };
    case "token": {
      const { token, tokenFile: file } = entry;
      return {
        connection: serverConnection({ server: entry.server, caFile: entry.caFile, caData: entry.caData }),
        token: token !== undefined ? () => Promise.resolve(token) : tokenFromFile(file ?? "", deps.clock),
      };
    }
    case "eks": {
      if (!deps.awsCredentials) throw new Error("eks authentication needs the AWS credential chain");
      return {
        connection: serverConnection({ server: entry.server, caFile: entry.caFile, caData: entry.caData }),
        token: eksTokenProvider({
          clusterName: entry.eksCluster,
          region: entry.region ?? deps.region ?? "",
          credentials: deps.awsCredentials(),
          clock: deps.clock,
        }),
      };
    }
    case "gke":
      return {
        connection: serverConnection({ server: entry.server, caFile: entry.caFile, caData: entry.caData }),
        token: gkeTokenProvider({ clock: deps.clock, ...(env.GCE_METADATA_HOST ? { metadataHost: env.GCE_METADATA_HOST } : {}) }),
      };
  }
}
