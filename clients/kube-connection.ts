// Where an API server is and how a request to it is secured. client-node's KubeConfig is one
// (kubeconfig files: client certificates, exec plugins, auth providers), loaded only by
// clients/kubeconfig.ts and only where a kubeconfig is used. In a pod (the bridge, in-cluster
// functions) and with a server plus token (Lambda) crdfn needs none of that: loading KubeConfig
// costs ~150 ms and ~23 MiB RSS (undici, openid, socks, js-yaml), more than the rest of a
// Lambda cold start, so these two cases are written out here (`npm run bench:cold`).
import { readFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { isIPv6 } from "node:net";
import type https from "node:https";

/** What KubeHttp needs of a connection; client-node's KubeConfig has this shape. */
export interface KubeConnection {
  getCurrentCluster(): { server: string } | null;
  /** Adds the TLS material and credentials of the current user to a request's options. */
  applyToHTTPSOptions(options: https.RequestOptions): Promise<void>;
}

/** Re-read a token file this often: projected ServiceAccount tokens rotate underneath us. */
const TOKEN_FILE_TTL_MS = 60_000;

/** A bearer token read from a file, re-read once it is a minute old. */
export function tokenFromFile(path: string, clock: () => Date): () => Promise<string> {
  let cached: { token: string; at: number } | undefined;
  return async () => {
    const now = clock().getTime();
    if (!cached || now - cached.at >= TOKEN_FILE_TTL_MS) cached = { token: (await readFile(path, "utf8")).trim(), at: now };
    return cached.token;
  };
}

export interface ServerOptions {
  server: string;
  /** A PEM file, or base64 PEM (as EKS's DescribeCluster gives it). Default: the system's CAs. */
  caFile?: string | undefined;
  caData?: string | undefined;
  /** Sent as `Authorization: Bearer`; without it the caller authenticates (KubeAccess.token). */
  token?: (() => Promise<string>) | undefined;
}

/** A server by URL and CA. The CA file is read once, here: a missing file fails at start. */
export function serverConnection(o: ServerOptions): KubeConnection {
  const ca = o.caData !== undefined ? Buffer.from(o.caData, "base64") : o.caFile !== undefined ? readFileSync(o.caFile) : undefined;
  return {
    getCurrentCluster: () => ({ server: o.server }),
    async applyToHTTPSOptions(options) {
      if (ca !== undefined) options.ca = ca;
      if (o.token) options.headers = { ...options.headers, Authorization: `Bearer ${await o.token()}` };
    },
  };
}

const SERVICE_ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount";

/**
 * The pod's ServiceAccount, as client-go's rest.InClusterConfig: KUBERNETES_SERVICE_HOST/PORT,
 * the mounted CA, and the mounted token re-read as it rotates. `root` prefixes the mount (tests).
 */
export function inClusterConnection(env: NodeJS.ProcessEnv, clock: () => Date, root = ""): KubeConnection {
  const host = env.KUBERNETES_SERVICE_HOST;
  const port = env.KUBERNETES_SERVICE_PORT;
  if (!host || !port) throw new Error("not running in a pod: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set");
  return serverConnection({
    server: `https://${isIPv6(host) ? `[${host}]` : host}:${port}`,
    caFile: `${root}${SERVICE_ACCOUNT}/ca.crt`,
    token: tokenFromFile(`${root}${SERVICE_ACCOUNT}/token`, clock),
  });
}
