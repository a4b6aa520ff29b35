// etcd + kube-apiserver + kube-controller-manager started the way envtest starts them:
// loopback ports, a temp folder, a throwaway CA, RBAC on, ServiceAccount token signing on.
import { request } from "node:https";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { ControlPlaneBinaries } from "./binaries.ts";
import type { PkiFiles } from "./pki.ts";
import { startServer, type RunningServer } from "./process.ts";
import type { Reaper } from "./reaper.ts";

export const SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local";

export function startEtcd(bins: ControlPlaneBinaries, dir: string, clientPort: number, peerPort: number, reaper: Reaper): Promise<RunningServer> {
  const client = `http://127.0.0.1:${clientPort}`;
  const peer = `http://127.0.0.1:${peerPort}`;
  return startServer(
    {
      name: "etcd",
      command: bins.etcd,
      args: [
        "--name=crdfn",
        `--data-dir=${join(dir, "etcd")}`,
        `--listen-client-urls=${client}`,
        `--advertise-client-urls=${client}`,
        `--listen-peer-urls=${peer}`,
        `--initial-advertise-peer-urls=${peer}`,
        `--initial-cluster=crdfn=${peer}`,
        // A throwaway store: fsync buys durability nobody needs here and costs most of etcd's latency.
        "--unsafe-no-fsync=true",
        "--log-level=warn",
      ],
      logFile: join(dir, "etcd.log"),
      ready: async () => {
        const res = await fetch(`${client}/health`);
        return res.ok && ((await res.json()) as { health?: string }).health === "true";
      },
    },
    reaper,
  );
}

export interface ApiServerOptions {
  bins: ControlPlaneBinaries;
  dir: string;
  pki: PkiFiles;
  etcdPort: number;
  port: number;
  reaper: Reaper;
  /** An OTLP gRPC collector (host:port) for the API server's own spans (KEP-647); untraced without. */
  tracingEndpoint?: string;
}

/**
 * The API server's tracing configuration (apiserver.config.k8s.io/v1 TracingConfiguration):
 * every request sampled, as a trace viewer in dev wants. It exports OTLP over gRPC only.
 */
export function tracingConfig(endpoint: string): string {
  return ["apiVersion: apiserver.config.k8s.io/v1", "kind: TracingConfiguration", `endpoint: ${endpoint}`, "samplingRatePerMillion: 1000000", ""].join("\n");
}

export function startApiServer(o: ApiServerOptions): Promise<RunningServer> {
  const certDir = join(o.dir, "apiserver");
  mkdirSync(certDir, { recursive: true });
  const tracing = o.tracingEndpoint === undefined ? undefined : join(o.dir, "apiserver-tracing.yaml");
  if (tracing) writeFileSync(tracing, tracingConfig(o.tracingEndpoint!));
  return startServer(
    {
      name: "kube-apiserver",
      command: o.bins.kubeApiServer,
      args: [
        `--etcd-servers=http://127.0.0.1:${o.etcdPort}`,
        "--bind-address=127.0.0.1",
        "--advertise-address=127.0.0.1",
        `--secure-port=${o.port}`,
        `--cert-dir=${certDir}`,
        `--tls-cert-file=${o.pki.servingCert}`,
        `--tls-private-key-file=${o.pki.servingKey}`,
        `--client-ca-file=${o.pki.caCert}`,
        "--authorization-mode=RBAC",
        `--service-account-issuer=${SERVICE_ACCOUNT_ISSUER}`,
        `--service-account-key-file=${o.pki.saPublicKey}`,
        `--service-account-signing-key-file=${o.pki.saPrivateKey}`,
        "--service-cluster-ip-range=10.0.0.0/24",
        "--allow-privileged=true",
        // Events expire quickly in a throwaway cluster; tests read them within seconds.
        "--event-ttl=1h",
        ...(tracing ? [`--tracing-config-file=${tracing}`] : []),
        "--v=1",
      ],
      logFile: join(o.dir, "kube-apiserver.log"),
      ready: async () => (await httpsGet(`https://127.0.0.1:${o.port}/readyz`, o.pki)).status === 200,
    },
    o.reaper,
  );
}

export interface ControllerManagerOptions {
  bins: ControlPlaneBinaries;
  dir: string;
  pki: PkiFiles;
  kubeconfigPath: string;
  apiPort: number;
  reaper: Reaper;
}

export function startControllerManager(o: ControllerManagerOptions): Promise<RunningServer> {
  return startServer(
    {
      name: "kube-controller-manager",
      command: o.bins.kubeControllerManager!,
      args: [
        `--kubeconfig=${o.kubeconfigPath}`,
        "--leader-elect=false",
        // Nothing scrapes it; not serving keeps it off the ports other tests pick.
        "--secure-port=0",
        `--service-account-private-key-file=${o.pki.saPrivateKey}`,
        `--root-ca-file=${o.pki.caCert}`,
        `--cluster-signing-cert-file=${o.pki.caCert}`,
        `--cluster-signing-key-file=${o.pki.caKey}`,
        "--use-service-account-credentials=false",
        "--v=1",
      ],
      logFile: join(o.dir, "kube-controller-manager.log"),
      // The ServiceAccount controller creating `default` in `default` shows its informers synced.
      ready: async () => (await httpsGet(`https://127.0.0.1:${o.apiPort}/api/v1/namespaces/default/serviceaccounts/default`, o.pki)).status === 200,
    },
    o.reaper,
  );
}

export function httpsGet(url: string, pki: PkiFiles): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { ca: pki.pem.ca, cert: pki.pem.adminCert, key: pki.pem.adminKey, timeout: 5000 }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (c: string) => (body += c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on("timeout", () => req.destroy(new Error("timeout")));
    req.on("error", reject);
    req.end();
  });
}
