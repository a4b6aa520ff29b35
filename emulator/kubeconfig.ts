import { writeFileSync } from "node:fs";
import { stringify } from "yaml";

export interface KubeconfigCredentials {
  server: string;
  caPem: string;
  user: { clientCertPem: string; clientKeyPem: string } | { token: string };
  contextName?: string;
}

const b64 = (s: string) => Buffer.from(s).toString("base64");

/** A self-contained kubeconfig (certificates embedded), usable by kubectl and client-node. */
export function kubeconfigYaml(c: KubeconfigCredentials): string {
  const name = c.contextName ?? "crdfn-local";
  const user =
    "token" in c.user ? { token: c.user.token } : { "client-certificate-data": b64(c.user.clientCertPem), "client-key-data": b64(c.user.clientKeyPem) };
  return stringify({
    apiVersion: "v1",
    kind: "Config",
    clusters: [{ name, cluster: { server: c.server, "certificate-authority-data": b64(c.caPem) } }],
    users: [{ name, user }],
    contexts: [{ name, context: { cluster: name, user: name } }],
    "current-context": name,
  });
}

export function writeKubeconfig(path: string, c: KubeconfigCredentials): void {
  writeFileSync(path, kubeconfigYaml(c), { mode: 0o600 });
}
