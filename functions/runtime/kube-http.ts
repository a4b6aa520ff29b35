// KubeApi over HTTPS, authenticated from a KubeConfig (client certificates, tokens, exec
// plugins) or from a token provider that overrides it (EKS IAM tokens, projected tokens).
import https from "node:https";
import http from "node:http";
import type { KubeConfig } from "@kubernetes/client-node";
import { ApiError, resourcePath, type KubeApi, type KubeObject } from "./kube-api.ts";

export interface ApiAccess {
  kubeConfig: KubeConfig;
  /** When set, its bearer token replaces whatever the kubeconfig's user would send. */
  token?: () => Promise<string>;
  timeoutMs?: number;
}

export function createKubeApi(access: ApiAccess): KubeApi {
  const cluster = access.kubeConfig.getCurrentCluster();
  if (!cluster) throw new Error("kubeconfig: no current cluster");
  const server = new URL(cluster.server);
  const secure = server.protocol === "https:";
  // One keep-alive agent per client: a warm function reuses its TLS connection.
  const agent = secure ? new https.Agent({ keepAlive: true }) : new http.Agent({ keepAlive: true });
  const timeout = access.timeoutMs ?? 15_000;

  async function request(method: string, path: string, body?: unknown, contentType = "application/json"): Promise<KubeObject | undefined> {
    const options: https.RequestOptions = {
      method,
      hostname: server.hostname,
      port: server.port || (secure ? 443 : 80),
      path: `${server.pathname.replace(/\/$/, "")}${path}`,
      headers: { accept: "application/json" },
      agent,
      timeout,
    };
    await access.kubeConfig.applyToHTTPSOptions(options);
    // client-node sets a fresh, non-keep-alive agent per request: a TLS handshake per API call,
    // about a third of a busy function's CPU. Ours still gets the TLS material from `options`.
    options.agent = agent;
    const headers = (options.headers ?? {}) as Record<string, string>;
    if (access.token) headers.Authorization = `Bearer ${await access.token()}`;
    const payload = body === undefined ? undefined : JSON.stringify(body);
    if (payload !== undefined) {
      headers["content-type"] = contentType;
      headers["content-length"] = String(Buffer.byteLength(payload));
    }
    options.headers = headers;
    const { status, text } = await new Promise<{ status: number; text: string }>((resolve, reject) => {
      const req = (secure ? https : http).request(options, (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString("utf8") }));
        res.on("error", reject);
      });
      req.on("timeout", () => req.destroy(new Error(`${method} ${path}: timed out after ${timeout} ms`)));
      req.on("error", reject);
      req.end(payload);
    });
    if (status === 404 && method === "GET") return undefined;
    if (status < 200 || status >= 300) {
      let reason = "Unknown";
      let message = text.slice(0, 500);
      try {
        const s = JSON.parse(text) as { reason?: string; message?: string };
        reason = s.reason ?? reason;
        message = s.message ?? message;
      } catch {
        // not a Status object; keep the raw text
      }
      throw new ApiError(status, reason, `${method} ${path}: ${status} ${message}`);
    }
    return JSON.parse(text) as KubeObject;
  }

  const managedBy = (fieldManager: string | undefined): string => (fieldManager ? `?fieldManager=${encodeURIComponent(fieldManager)}` : "");
  const must = (o: KubeObject | undefined): KubeObject => {
    if (!o) throw new ApiError(404, "NotFound", "object vanished");
    return o;
  };
  return {
    get: (ref) => request("GET", resourcePath(ref)),
    replaceStatus: async (ref, object, fieldManager) => must(await request("PUT", `${resourcePath(ref, "status")}${managedBy(fieldManager)}`, object)),
    mergePatch: async (ref, patch, fieldManager) => must(await request("PATCH", `${resourcePath(ref)}${managedBy(fieldManager)}`, patch, "application/merge-patch+json")),
    apply: async (ref, object, fieldManager) =>
      must(
        await request(
          "PATCH",
          `${resourcePath(ref)}?fieldManager=${encodeURIComponent(fieldManager)}&force=true`,
          object,
          "application/apply-patch+yaml",
        ),
      ),
    create: async (ref, object) => must(await request("POST", resourcePath(ref), object)),
    list: async (ref, labelSelector) => {
      const query = labelSelector ? `?labelSelector=${encodeURIComponent(labelSelector)}` : "";
      const list = must(await request("GET", `${resourcePath(ref)}${query}`)) as unknown as { items?: KubeObject[] };
      return list.items ?? [];
    },
    delete: async (ref, preconditions) => {
      try {
        await request("DELETE", resourcePath(ref), { apiVersion: "v1", kind: "DeleteOptions", ...(preconditions ? { preconditions } : {}), propagationPolicy: "Background" });
      } catch (e) {
        if (!(e instanceof ApiError && e.code === 404)) throw e;
      }
    },
  };
}
