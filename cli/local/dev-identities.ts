// `crdfn dev` as deployed: the operators' generated identities and admission policies applied to
// the dev cluster (the same generators `crdfn generate` uses), and the functions and the bridge
// run with those identities' own ServiceAccount tokens — so dev refuses what production refuses
// (a write in a namespace not served, a child another controls, a read it was not granted) and
// shows it the way production shows it, before anything is deployed.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CoreV1Api, KubernetesObjectApi, PatchStrategy, loadYaml, type KubeConfig, type KubernetesObject } from "@kubernetes/client-node";
import { stringify } from "yaml";
import { KubeHttp } from "../../clients/kube-http.ts";
import { untilAdmissionInForce } from "./admission-in-force.ts";
import { serverConnection, tokenFromFile, type KubeConnection } from "../../clients/kube-connection.ts";
import { bridgeName, bridgeWatchRbacOf } from "../../deploy/bridge.ts";
import { deniedNamespaces } from "../../deploy/settings.ts";
import { admissionPolicyOf, servedNamespacesPolicyOf } from "../../deploy/admission.ts";
import { functionIdentity, functionRbacOf, operatorName } from "../../deploy/rbac.ts";
import type { Operator } from "../../core/operator.ts";
import { SetupError } from "../../emulator/errors.ts";
import type { Reaper } from "../../emulator/reaper.ts";

export const DEV_FUNCTIONS_NAMESPACE = "crdfn-functions";
export const DEV_BRIDGE_NAMESPACE = "crdfn-system";

export interface DevIdentityOptions {
  kubeConfig: KubeConfig;
  operators: ReadonlyArray<Operator<unknown>>;
  /** The namespaces served, as `namespaces:` in crdfn.deploy.yaml. */
  namespaces: readonly string[];
  /** Names the bridge's identity (crdfn-bridge-<project>). */
  project: string;
  /**
   * Where the tokens are written: a folder `tokens-*` made (owner-only) in the state directory
   * (`crdfn dev`: `.crdfn`), removed at stop and, after a SIGKILL, by `reaper`. Default: the
   * system's temporary folder (tests and benchmarks, which have no state directory).
   */
  stateDir?: string;
  /** Removes the tokens' folder when this process dies without stopping (emulator/reaper.mjs). */
  reaper?: Reaper;
  log?: (line: string) => void;
  clock?: () => Date;
}

export interface DevIdentities {
  /** The environment an operator's function runs with: the API server, its CA, its own token. */
  functionEnv(operator: Operator<unknown>): Record<string, string>;
  /** How an operator's function reaches the API server in-process: with its own token. */
  functionConnection(operator: Operator<unknown>): KubeConnection;
  /** How the bridge reaches the API server: with its own ServiceAccount's token. */
  bridgeConnection: KubeConnection;
  /** Where the bridge's token file is (a bridge run as its own process reads it, as in a pod). */
  bridgeEnv: Record<string, string>;
  /** Stops refreshing the tokens and removes their files. */
  stop(): void;
}

/**
 * Tokens live as short as the API server allows (a TokenRequest's expirationSeconds is at least
 * 600), so one left behind is soon worthless. Each is replaced once it is half-way through its
 * life; the check runs every 30 s, and every 5 s while a renewal fails (the API server down). The runtimes re-read their token files every minute
 * (clients/kube-connection.ts).
 */
export const TOKEN_SECONDS = 600;
const REFRESH_AFTER_MS = (TOKEN_SECONDS / 2) * 1000;
const CHECK_MS = 30_000;
const RETRY_MS = 5_000;

type Manifest = Record<string, unknown> & { kind: string; metadata: { name: string; namespace?: string } };

/** What `crdfn generate` writes for identities, for these operators and namespaces. */
export function identityManifests(operators: ReadonlyArray<Operator<unknown>>, namespaces: readonly string[], project: string): Manifest[] {
  const scope = { functionsNamespace: DEV_FUNCTIONS_NAMESPACE, namespaces };
  const bridge = { project, namespaces: [...namespaces], bridge: { namespace: DEV_BRIDGE_NAMESPACE } };
  const denied = deniedNamespaces({ ...scope, namespaces: [...namespaces], bridge: bridge.bridge });
  return [
    ...[DEV_FUNCTIONS_NAMESPACE, DEV_BRIDGE_NAMESPACE, ...namespaces].map((name) => ({ apiVersion: "v1", kind: "Namespace", metadata: { name } })),
    ...operators.flatMap((op) => [...functionRbacOf(op, scope), ...admissionPolicyOf(op, { ...scope, denied }), ...servedNamespacesPolicyOf(op, namespaces)]),
    { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: bridgeName(bridge), namespace: DEV_BRIDGE_NAMESPACE } },
    ...bridgeWatchRbacOf(operators, bridge),
  ] as Manifest[];
}

export async function applyDevIdentities(o: DevIdentityOptions): Promise<DevIdentities> {
  const clock = o.clock ?? (() => new Date());
  await applyIdentityManifests(o);
  const cluster = o.kubeConfig.getCurrentCluster();
  if (!cluster) throw new SetupError("the kubeconfig has no current cluster");
  await untilPoliciesAreInForce(o);
  const stateDir = o.stateDir ?? tmpdir();
  mkdirSync(stateDir, { recursive: true });
  const dir = mkdtempSync(join(stateDir, "tokens-"));
  o.reaper?.trackDir(dir);
  const core = o.kubeConfig.makeApiClient(CoreV1Api);
  const accounts = [
    ...o.operators.map((op) => ({ name: functionIdentity(op, DEV_FUNCTIONS_NAMESPACE).serviceAccount, namespace: DEV_FUNCTIONS_NAMESPACE })),
    { name: bridgeName({ project: o.project }), namespace: DEV_BRIDGE_NAMESPACE },
  ];
  const fileOf = (name: string) => join(dir, `${name}.token`);
  const issued = new Map<string, number>();
  const refresh = async (): Promise<void> => {
    for (const a of accounts) {
      if (clock().getTime() - (issued.get(a.name) ?? -Infinity) < REFRESH_AFTER_MS) continue;
      const t = await core.createNamespacedServiceAccountToken({
        name: a.name,
        namespace: a.namespace,
        body: { spec: { audiences: [], expirationSeconds: TOKEN_SECONDS } },
      });
      writeFileSync(fileOf(a.name), t.status?.token ?? "", { mode: 0o600 });
      issued.set(a.name, clock().getTime());
    }
  };
  try {
    await refresh();
  } catch (e) {
    rmSync(dir, { recursive: true, force: true });
    throw e;
  }
  // While renewals fail (the API server down or restarting), they are retried every few seconds,
  // so a token is renewed in the first moment the server answers again, long before it expires.
  let warned = false;
  let timer: NodeJS.Timeout;
  let stopped = false;
  const schedule = (ms: number): void => {
    if (stopped) return;
    timer = setTimeout(() => {
      // A request that never answers (a server killed mid-request) must not end the renewals.
      const gaveUp = new Promise<never>((_, reject) =>
        setTimeout(() => reject(new Error(`no answer within ${(RETRY_MS * 4) / 1000} s`)), RETRY_MS * 4).unref(),
      );
      Promise.race([refresh(), gaveUp]).then(
        () => {
          warned = false;
          schedule(CHECK_MS);
        },
        (e: unknown) => {
          if (stopped) return;
          if (!warned)
            o.log?.(
              `! could not renew the dev identities' tokens (retrying every ${RETRY_MS / 1000} s; they expire ${TOKEN_SECONDS} s after issue): ${(e as Error).message.split("\n")[0]}`,
            );
          warned = true;
          schedule(RETRY_MS);
        },
      );
    }, ms);
    timer.unref();
  };
  schedule(CHECK_MS);
  const ca: Record<string, string> =
    cluster.caData !== undefined ? { CRDFN_KUBE_CA_DATA: cluster.caData } : cluster.caFile !== undefined ? { CRDFN_KUBE_CA_FILE: cluster.caFile } : {};
  const caFile = cluster.caFile ?? (cluster.caData !== undefined ? join(dir, "ca.crt") : undefined);
  if (cluster.caData !== undefined) writeFileSync(join(dir, "ca.crt"), Buffer.from(cluster.caData, "base64"), { mode: 0o600 });
  const connectionOf = (serviceAccount: string) => serverConnection({ server: cluster.server, caFile, token: tokenFromFile(fileOf(serviceAccount), clock) });
  o.log?.(
    `identities as deployed: ${o.operators.map((op) => `crdfn-${operatorName(op)}`).join(", ")} and ${bridgeName({ project: o.project })}, serving ${o.namespaces.join(", ")}`,
  );
  const bridgeAccount = bridgeName({ project: o.project });
  return {
    functionEnv: (op) => ({
      CRDFN_KUBE_AUTH: "token",
      CRDFN_KUBE_SERVER: cluster.server,
      ...ca,
      CRDFN_KUBE_TOKEN_FILE: fileOf(functionIdentity(op, DEV_FUNCTIONS_NAMESPACE).serviceAccount),
    }),
    functionConnection: (op) => connectionOf(functionIdentity(op, DEV_FUNCTIONS_NAMESPACE).serviceAccount),
    bridgeConnection: connectionOf(bridgeAccount),
    bridgeEnv: {
      CRDFN_KUBE_SERVER: cluster.server,
      ...(caFile ? { CRDFN_KUBE_CA_FILE: caFile } : {}),
      CRDFN_KUBE_TOKEN_FILE: fileOf(bridgeAccount),
      CRDFN_NAMESPACES: o.namespaces.join(","),
    },
    stop() {
      stopped = true;
      clearTimeout(timer);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** The identities' ServiceAccounts, Roles, bindings and admission policies, applied as the deployment's are. */
async function applyIdentityManifests(o: DevIdentityOptions): Promise<void> {
  const api = KubernetesObjectApi.makeApiClient(o.kubeConfig);
  for (const m of identityManifests(o.operators, o.namespaces, o.project)) {
    // client-node's typed model keeps every key its serializer knows (see installCrds in install-crds.ts).
    const object = loadYaml<KubernetesObject>(stringify(m));
    try {
      await api.patch(object, undefined, undefined, "crdfn-dev", true, PatchStrategy.ServerSideApply);
    } catch (e) {
      throw new SetupError(
        `applying ${m.kind} ${m.metadata.namespace ? `${m.metadata.namespace}/` : ""}${m.metadata.name} (as deployed: --no-identities runs everything as the kubeconfig's user instead): ${(e as Error).message.split("\n")[0]}`,
      );
    }
  }
}

/** Until the operators' policies are loaded, dev would accept what production refuses. */
async function untilPoliciesAreInForce(o: DevIdentityOptions): Promise<void> {
  await untilAdmissionInForce(new KubeHttp({ connection: o.kubeConfig }), {
    probe: "crdfn-dev-policies-loaded",
    namespace: o.namespaces[0] ?? "default",
    timeoutMs: 30_000,
  });
}
