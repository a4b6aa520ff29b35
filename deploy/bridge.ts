// The bridge's deployment, generated from the operators it serves: its settings (ConfigMap), read
// access to exactly what it watches, its Lease, and the Deployment. One active replica holds the
// Lease and publishes; a standby takes over. Each project has its own bridge, named for it
// (crdfn-bridge-<project>), so that several projects' deploy files applied to one cluster keep
// each its own configuration and grants instead of overwriting one shared set.
import type { Operator } from "../core/operator.ts";
import type { DeploySettings, LambdaDeploySettings } from "./settings.ts";
import { grantsOf, type PolicyRule } from "./rbac.ts";
import { eventQueueUrl } from "./queue-names.ts";
import { bridgeTracingEnv } from "./tracing-env.ts";

type Manifest = Record<string, unknown>;
const rbac = "rbac.authorization.k8s.io/v1";

/** The name of the project's bridge: its Deployment, ServiceAccount, ConfigMap, Lease and RBAC. */
export const bridgeName = (s: Pick<DeploySettings, "project">): string => `crdfn-bridge-${s.project}`;

const ref = (r: { group: string; version: string; plural: string }) => ({ group: r.group, version: r.version, plural: r.plural });

/** Where an operator's events go: its own SQS queue or Pub/Sub topic; neither: the bridge's default `queue`. */
export interface EventDestination {
  queueUrl?: string;
  topic?: string;
}

/** What a bridge watches for these operators, and where each one's events go. */
export function watchedResourcesOf(
  operators: ReadonlyArray<Operator<unknown>>,
  destinationOf: (operator: Operator<unknown>) => EventDestination = () => ({}),
): Manifest[] {
  return operators.map((op) => ({
    ...ref(op.resource),
    owns: op.owns.map(ref),
    ...(op.reads.length > 0 ? { reads: op.reads.map(ref) } : {}),
    ...destinationOf(op),
    ...(op.resyncSeconds ? { resyncSeconds: op.resyncSeconds } : {}),
    ...(op.eventBodies === false ? { bodies: false } : {}),
  }));
}

/** One field manager for all, which the bridge recognises as the functions' own child writes; "" when the operators differ (every child change then announces). */
export function functionFieldManagerOf(operators: ReadonlyArray<Operator<unknown>>): string {
  const managers = [...new Set(operators.map((op) => op.fieldManager))];
  return managers.length === 1 ? managers[0]! : "";
}

/** Where a bridge runs, besides the operators: what differs between Lambda, Cloud Run and `crdfn dev`. */
export interface BridgePlace {
  cluster: string;
  /** The default destination the bridge's schema requires (resources that name none send here). */
  queue: { url: string } | { topic: string };
  destinationOf?: (operator: Operator<unknown>) => EventDestination;
  /** Undefined: every namespace (a dev cluster without identities). */
  namespaces?: readonly string[];
  lease?: { name: string; namespace: string; durationSeconds: number };
  aws?: { region: string };
  resyncSeconds?: number;
}

/**
 * The bridge's bridge.yaml (bridge/config.ts reads it through CRDFN_CONFIG_FILE): the one
 * function behind the Lambda ConfigMap, the Cloud Run one (gcp.ts) and `crdfn dev`'s bridge.
 */
export function bridgeSettingsOf(operators: ReadonlyArray<Operator<unknown>>, at: BridgePlace): Manifest {
  return {
    cluster: at.cluster,
    queue: at.queue,
    resources: watchedResourcesOf(operators, at.destinationOf),
    ...(at.namespaces === undefined ? {} : { namespaces: [...at.namespaces] }),
    functionFieldManager: functionFieldManagerOf(operators),
    ...(at.lease === undefined ? {} : { lease: at.lease }),
    ...(at.aws === undefined ? {} : { aws: at.aws }),
    ...(at.resyncSeconds === undefined ? {} : { resyncSeconds: at.resyncSeconds }),
  };
}

/** The deployed bridge's Lease: a standby takes over within seconds of the holder's loss. */
export const bridgeLeaseOf = (s: Pick<DeploySettings, "project"> & { bridge: Pick<DeploySettings["bridge"], "namespace"> }) => ({
  name: bridgeName(s),
  namespace: s.bridge.namespace,
  durationSeconds: 8,
});

/** On Lambda: each operator's events go to its function's FIFO queue. */
export function bridgeConfigOf(operators: ReadonlyArray<Operator<unknown>>, s: LambdaDeploySettings): Manifest {
  return bridgeSettingsOf(operators, {
    cluster: s.cluster,
    // Every resource names its own queue; this one is only the fallback the schema requires.
    queue: { url: eventQueueUrl(operators[0]!, s) },
    destinationOf: (op) => ({ queueUrl: eventQueueUrl(op, s) }),
    namespaces: s.namespaces,
    lease: bridgeLeaseOf(s),
    aws: { region: s.queues.region },
  });
}

/**
 * get/list/watch on each watched resource, owned kind and referenced kind, split by where the
 * grant must live. (A referenced kind is watched as metadata only, so the bridge never receives a
 * Secret's data; RBAC has no verb for that, so list/watch are what it needs.)
 */
function watchRules(operators: ReadonlyArray<Operator<unknown>>): { namespaced: PolicyRule[]; cluster: PolicyRule[] } {
  const namespaced = new Map<string, Set<string>>();
  const cluster = new Map<string, Set<string>>();
  const add = (m: Map<string, Set<string>>, group: string, plural: string) => m.set(group, (m.get(group) ?? new Set()).add(plural));
  for (const op of operators) {
    add(op.resource.scope === "Namespaced" ? namespaced : cluster, op.resource.group, op.resource.plural);
    for (const o of op.owns) add(o.namespaced ? namespaced : cluster, o.group, o.plural);
    for (const r of op.reads) add(r.namespaced ? namespaced : cluster, r.group, r.plural);
  }
  const rules = (m: Map<string, Set<string>>): PolicyRule[] =>
    [...m].sort(([a], [b]) => a.localeCompare(b)).map(([g, plurals]) => ({ apiGroups: [g], resources: [...plurals].sort(), verbs: ["get", "list", "watch"] }));
  return { namespaced: rules(namespaced), cluster: rules(cluster) };
}

/** Read-only access to what the bridge watches: cluster-wide, or Roles in the served namespaces. */
export function bridgeWatchRbacOf(
  operators: ReadonlyArray<Operator<unknown>>,
  s: Pick<DeploySettings, "project" | "namespaces"> & { bridge: Pick<DeploySettings["bridge"], "namespace"> },
): Manifest[] {
  const name = bridgeName(s);
  const subjects = [{ kind: "ServiceAccount", name, namespace: s.bridge.namespace }];
  return grantsOf(name, subjects, watchRules(operators), s.namespaces);
}

/** Leader election: its own Lease only. `create` cannot be limited by name (the object does not exist yet), so it is granted on leases in this namespace alone. */
export function bridgeLeaseRbacOf(s: DeploySettings): Manifest[] {
  const namespace = s.bridge.namespace;
  const bridge = bridgeName(s);
  const name = `${bridge}-lease`;
  return [
    {
      apiVersion: rbac,
      kind: "Role",
      metadata: { name, namespace },
      rules: [
        { apiGroups: ["coordination.k8s.io"], resources: ["leases"], verbs: ["create"] },
        { apiGroups: ["coordination.k8s.io"], resources: ["leases"], resourceNames: [bridge], verbs: ["get", "update"] },
      ],
    },
    {
      apiVersion: rbac,
      kind: "RoleBinding",
      metadata: { name, namespace },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name },
      subjects: [{ kind: "ServiceAccount", name: bridge, namespace }],
    },
  ];
}

/**
 * The Secret (in the bridge's namespace) whose `key` holds this cluster's event key, `<kid>:<secret>`:
 * the bridge signs every event with it. Created by the user (docs/security.md) and never
 * generated: a key in infra/generated/ would be committed with it.
 */
export const bridgeEventKeySecretName = (s: DeploySettings): string => `${bridgeName(s)}-event-key`;
export const EVENT_KEY_SECRET_KEY = "key";

/**
 * The bridge container's NODE_OPTIONS (`crdfn dev` and the benchmarks run its process with them
 * too). Its index keeps about 0.9 KiB per object with one child (451 B the parent, 484 the child:
 * `npm run bench:trackermem`), so 100k of each take ~90 MiB of the 128. A capped old space makes
 * V8 collect before the heap grows. The young generation is capped at 4 MiB a semi-space (V8's
 * own cap is 16): at 8 MiB, peak RSS was 123 MiB against 103 at 2 MiB (1k objects); at 2 MiB a
 * cold start of 10k objects spent 7.7–8.6 s of the bridge's main thread in GC against 5.2 s at
 * 4 MiB and 4.2 s at 8, the peak RSS 136–139, 139 and 148–151 MiB; at 100k, 87.8 s at 2 MiB
 * and 71.0 s at 4, 228 and 229 MiB (`npm run bench:coldscale -- --split`, docs/performance.md).
 * The bridge's whole CPU per object was not shown to fall: the runs' noise is as large.
 */
export const BRIDGE_NODE_OPTIONS = "--max-old-space-size=128 --max-semi-space-size=4";

export function bridgeDeploymentOf(s: DeploySettings): Manifest {
  const name = bridgeName(s);
  // The instance label keeps two projects' bridges (in one namespace) out of each other's selector.
  const labels = { "app.kubernetes.io/name": "crdfn-bridge", "app.kubernetes.io/instance": s.project };
  return {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name, namespace: s.bridge.namespace },
    spec: {
      // Two replicas: one publishes (holds the Lease), the other takes over within 15 s.
      replicas: s.bridge.replicas,
      selector: { matchLabels: labels },
      strategy: { type: "RollingUpdate", rollingUpdate: { maxUnavailable: 0, maxSurge: 1 } },
      template: {
        metadata: { labels, annotations: { "prometheus.io/scrape": "true", "prometheus.io/port": "8080" } },
        spec: {
          serviceAccountName: name,
          // Long enough for SIGTERM to flush in-flight batches (10 s) and release the Lease.
          terminationGracePeriodSeconds: 20,
          securityContext: { runAsNonRoot: true, runAsUser: 10001, runAsGroup: 10001, seccompProfile: { type: "RuntimeDefault" } },
          containers: [
            {
              name: "bridge",
              image: s.bridge.image,
              imagePullPolicy: "IfNotPresent",
              env: [
                { name: "CRDFN_CONFIG_FILE", value: "/etc/crdfn/bridge.yaml" },
                { name: "CRDFN_LEASE_IDENTITY", valueFrom: { fieldRef: { fieldPath: "metadata.name" } } },
                { name: "CRDFN_HTTP_PORT", value: "8080" },
                { name: "NODE_OPTIONS", value: BRIDGE_NODE_OPTIONS },
                // Not optional: a bridge without its key would publish what every function refuses.
                { name: "CRDFN_EVENT_KEY", valueFrom: { secretKeyRef: { name: bridgeEventKeySecretName(s), key: EVENT_KEY_SECRET_KEY } } },
                ...Object.entries(bridgeTracingEnv(s.tracing)).map(([name, value]) => ({ name, value })),
              ],
              ports: [{ name: "http", containerPort: 8080 }],
              livenessProbe: { httpGet: { path: "/healthz", port: "http" }, periodSeconds: 10 },
              readinessProbe: { httpGet: { path: "/readyz", port: "http" }, periodSeconds: 5 },
              startupProbe: { httpGet: { path: "/healthz", port: "http" }, failureThreshold: 30, periodSeconds: 2 },
              resources: { requests: { cpu: "50m", memory: "160Mi" }, limits: { memory: "384Mi" } },
              securityContext: { allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ["ALL"] } },
              volumeMounts: [{ name: "config", mountPath: "/etc/crdfn", readOnly: true }],
            },
          ],
          volumes: [{ name: "config", configMap: { name } }],
        },
      },
    },
  };
}
