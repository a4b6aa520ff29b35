// Raw API requests for tests that need the status code: JSON in, JSON out, with the
// kubeconfig's identity through the project's own client (clients/kube-http.ts).
import { execFileSync } from "node:child_process";
import type { KubeConfig } from "@kubernetes/client-node";
import { KubeHttp } from "../../clients/kube-http.ts";
import type { LocalCluster } from "../../emulator/types.ts";

export interface Reply {
  status: number;
  body: Record<string, unknown> & { metadata?: { resourceVersion?: string; uid?: string; name?: string } };
}

const clients = new WeakMap<KubeConfig, KubeHttp>();

/** One API request with the kubeconfig's identity; JSON in, JSON out. */
export async function kube(kc: KubeConfig, method: string, path: string, body?: unknown, contentType = "application/json"): Promise<Reply> {
  let http = clients.get(kc);
  if (http === undefined) clients.set(kc, (http = new KubeHttp({ connection: kc, timeoutMs: 60_000 })));
  const { status, text } = await http.request(method, path, { body, contentType });
  let parsed: Reply["body"];
  try {
    parsed = text === "" ? {} : (JSON.parse(text) as Reply["body"]);
  } catch {
    parsed = { message: text };
  }
  return { status, body: parsed };
}

export async function ok(reply: Promise<Reply>, what: string): Promise<Reply> {
  const r = await reply;
  if (r.status >= 300) throw new Error(`${what}: HTTP ${r.status} ${JSON.stringify(r.body).slice(0, 300)}`);
  return r;
}

export const rvOf = (r: Reply): string => r.body.metadata?.resourceVersion ?? "";

export function kubectl(cluster: LocalCluster, ...args: string[]): string {
  return execFileSync(cluster.kubectl, ["--kubeconfig", cluster.kubeconfigPath, ...args], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
}
