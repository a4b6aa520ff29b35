// The GCP side of each operator (target: cloudrun), as Terraform JSON (`gcp/main.tf.json`), and
// what the GKE cluster needs for it. Why Terraform: the Serverless Framework's google provider
// (serverless-google-cloudfunctions 4.6.0) deploys only 1st-gen Cloud Functions through Deployment
// Manager (cloudfunctions v1, runtimes up to nodejs16) with an `http` or `event` trigger: no Cloud
// Run functions, no push subscription of one's own, so no message ordering, dead-letter topic or
// retry policy. Terraform's google provider is what GCP users deploy these with, and JSON is its
// syntax for generated configuration.
//
// Per operator: its topic; an ordered push subscription to its function with a dead-letter topic
// (5 deliveries), a retry policy (5–600 s backoff) and OIDC push authentication as the project's
// push service account; the dead-letter topic and a pull subscription keeping what reaches it (14
// days); the function (Cloud Run functions, HTTP, its source the project's folder) running as its
// own service account, which may publish to its own topic (a deferred message's re-send) and get
// the GKE cluster (to authenticate; Kubernetes RBAC grants the rest); the push service account may
// invoke it. The bridge's Kubernetes ServiceAccount may publish to (and get) exactly those topics,
// through GKE Workload Identity Federation. Log-based metrics read the functions' reconcile lines.
import { posix } from "node:path";
import type { Operator } from "../core/operator.ts";
import { ConfigError } from "../core/config-error.ts";
import type { CloudRunDeploySettings } from "./settings.ts";
import { LOG_COUNTERS, LOG_DISTRIBUTIONS, METRIC_MARKER } from "../core/cloud-logging-metrics.ts";
import { bridgeLeaseOf, bridgeName, bridgeSettingsOf } from "./bridge.ts";
import { admissionPolicyOf } from "./admission.ts";
import { operatorResource } from "../core/event-auth.ts";
import { functionRbacOf, operatorName } from "./rbac.ts";
import { pubSubIdsOf, pubSubNamesOf, type PubSubNames } from "./queue-names.ts";
import { functionTracingEnv } from "./tracing-env.ts";

type Json = Record<string, unknown>;
type Manifest = Record<string, unknown> & { kind: string; metadata: { name: string; namespace?: string } };

export interface GcpOperator {
  operator: Operator<unknown>;
  /** The functions-framework function its source registers (the function's entry point). */
  entryPoint: string;
}

/** The subscription's settings, which the function is told as well (functions/adapters/push.ts). */
export const PUSH_POLICY = { maxDeliveryAttempts: 5, minimumBackoffSeconds: 5, maximumBackoffSeconds: 600 } as const;
/** A function's request timeout; push waits the ack deadline for an answer, so that is longer. */
const FUNCTION_TIMEOUT_SECONDS = 60;
/**
 * Each function's memory (a Kubernetes quantity, as the Cloud Functions v2 API reads it). Its CPU
 * is left unset, so Cloud Run derives it from the memory; the benchmark prices both (bench/cost.ts).
 */
export const FUNCTION_MEMORY = "256M";
const ACK_DEADLINE_SECONDS = 90;
const DEAD_LETTER_RETENTION = "1209600s"; // 14 days, as the SQS dead-letter queues keep theirs
const EVENT_RETENTION = "604800s"; // 7 days, Pub/Sub's longest default
/** Where `terraform apply` runs, inside the output folder. */
export const GCP_DIR = "gcp";

/** What one operator is called on GCP. */
export interface GcpNamesOf {
  /** Terraform's name for its resources (letters, digits, _). */
  tf: string;
  /** The Cloud Run function. */
  function: string;
  /** Its service account's id and email: GKE's user name for it. */
  accountId: string;
  email: string;
  pubsub: PubSubNames;
}

export function gcpNamesOf(operator: Operator<unknown>, s: CloudRunDeploySettings): GcpNamesOf {
  const n = operatorName(operator);
  const accountId = `${s.gcp.prefix}${n}`;
  if (accountId.length > 30)
    throw new ConfigError(
      `gcp.prefix: ${accountId} (the ${operator.resource.kind} function's service account) is longer than GCP's 30 characters: set a shorter gcp.prefix`,
    );
  return {
    tf: n.replace(/[^a-z0-9_]/g, "_"),
    function: `${s.gcp.prefix}${n}`,
    accountId,
    email: `${accountId}@${s.gcp.project}.iam.gserviceaccount.com`,
    pubsub: pubSubNamesOf(s.gcp.project, s.gcp.prefix, n),
  };
}

/** The push service account: it signs the OIDC token of every push request. */
const pushAccountId = (s: CloudRunDeploySettings): string => `${s.gcp.prefix}push`;

/** The bridge's Kubernetes ServiceAccount as an IAM principal (GKE Workload Identity Federation; no Google service account). */
const bridgePrincipal = (s: CloudRunDeploySettings): string =>
  `principal://iam.googleapis.com/projects/\${data.google_project.this.number}/locations/global/workloadIdentityPools/${s.gcp.project}.svc.id.goog/subject/ns/${s.bridge.namespace}/sa/${bridgeName(s)}`;
const pubsubAgent = "serviceAccount:service-${data.google_project.this.number}@gcp-sa-pubsub.iam.gserviceaccount.com";

/** The bridge's bridge.yaml on Cloud Run: a topic per operator. */
export function bridgeConfigOfPubSub(operators: ReadonlyArray<Operator<unknown>>, s: CloudRunDeploySettings): Json {
  const topicOf = (op: Operator<unknown>): string => gcpNamesOf(op, s).pubsub.topic;
  return bridgeSettingsOf(operators, {
    cluster: s.cluster,
    // Every resource names its own topic; this one is only the fallback the schema requires.
    queue: { topic: topicOf(operators[0]!) },
    destinationOf: (op) => ({ topic: topicOf(op) }),
    namespaces: s.namespaces,
    lease: bridgeLeaseOf(s),
  });
}

/**
 * In the GKE cluster, the Cloud Run function is its Google service account's email (GKE's user
 * name for an IAM principal): the same grants as the function's ServiceAccount and group, bound
 * to that user, and the same admission policy, matching it.
 */
export function gkeFunctionIdentityOf(operator: Operator<unknown>, s: CloudRunDeploySettings, denied: readonly string[]): Manifest[] {
  const { email } = gcpNamesOf(operator, s);
  const scope = { functionsNamespace: s.functionsNamespace, namespaces: s.namespaces };
  const bindings = (functionRbacOf(operator, scope) as Manifest[])
    .filter((m) => m.kind === "RoleBinding" || m.kind === "ClusterRoleBinding")
    .map((m) => ({
      ...m,
      metadata: { ...m.metadata, name: `${m.metadata.name}-gke` },
      subjects: [{ kind: "User", apiGroup: "rbac.authorization.k8s.io", name: email }],
    }));
  const lit = `'${email.replace(/'/g, "\\'")}'`;
  const policies = (admissionPolicyOf(operator, { ...scope, denied }) as Manifest[]).map((m) => {
    const spec = m.spec as Json;
    const name = `${m.metadata.name}-gke`;
    return m.kind === "ValidatingAdmissionPolicy"
      ? {
          ...m,
          metadata: { ...m.metadata, name },
          spec: { ...spec, matchConditions: [{ name: "is-the-function", expression: `request.userInfo.username == ${lit}` }] },
        }
      : { ...m, metadata: { ...m.metadata, name }, spec: { ...spec, policyName: name } };
  });
  return [...bindings, ...policies];
}

/**
 * The source folder as Terraform sees it from `<out>/gcp`. `base` is the settings file's folder
 * (absolute): a relative `out` may leave the project (`../deploy`), which a stand-in root would
 * clamp, and an absolute `out` is seen from anywhere, so the source is then written absolute.
 */
export function sourceDirFromTerraform(s: CloudRunDeploySettings, base: string): string {
  const source = absolute(base, s.gcp.source);
  if (posix.isAbsolute(slashed(s.out))) return source;
  return posix.relative(absolute(base, posix.join(s.out, GCP_DIR)), source) || ".";
}

const slashed = (path: string): string => path.replace(/\\/g, "/");
/** A settings path (relative to the settings folder, or absolute) as an absolute path: pure, `base` is absolute. */
function absolute(base: string, path: string): string {
  if (!posix.isAbsolute(slashed(base))) throw new Error(`the settings folder must be absolute: ${base}`);
  return posix.resolve(slashed(base), slashed(path));
}

const APIS = [
  "cloudfunctions.googleapis.com",
  "run.googleapis.com",
  "cloudbuild.googleapis.com",
  "artifactregistry.googleapis.com",
  "pubsub.googleapis.com",
  "container.googleapis.com",
  "logging.googleapis.com",
  "secretmanager.googleapis.com",
];

/**
 * The Secret Manager secret holding one operator's event keys (its function's CRDFN_EVENT_KEYS,
 * derived from the cluster's key by `crdfn key derive`: the function verifies its operator's
 * events with them, functions/clusters/registry.ts), one per operator, so a function reads its
 * own operator's keys and no other's. Created by the user before `terraform apply`, never by
 * Terraform: a secret version it created would keep the key in its state.
 */
export const eventKeysSecretId = (s: CloudRunDeploySettings, operator: Operator<unknown>): string => `${s.gcp.prefix}event-keys-${operatorName(operator)}`;

/** gcp/main.tf.json; `base`: the settings file's folder (absolute), which `out` and `gcp.source` are relative to. */
export function terraformOf(operators: ReadonlyArray<GcpOperator>, s: CloudRunDeploySettings, base: string): Json {
  const g = s.gcp;
  const apis = Object.fromEntries(APIS.map((api) => [api.split(".")[0]!, { service: api, disable_on_destroy: false }]));
  const apiDeps = APIS.map((api) => `google_project_service.${api.split(".")[0]!}`);
  const r = {
    google_project_service: apis,
    // The functions' source, read by Cloud Build with the project's own identity: never public (checkov CKV_GCP_114).
    google_storage_bucket: {
      source: {
        name: `${g.project}-${g.prefix}sources`,
        location: g.region,
        uniform_bucket_level_access: true,
        public_access_prevention: "enforced",
        force_destroy: true,
      },
    },
    google_storage_bucket_object: {
      source: {
        name: "source-${data.archive_file.source.output_md5}.zip",
        bucket: ref("google_storage_bucket", "source", "name"),
        source: "${data.archive_file.source.output_path}",
      },
    },
    google_service_account: { push: { account_id: pushAccountId(s), display_name: "crdfn push subscriptions: signs their OIDC tokens" } } as Json,
    google_service_account_iam_member: {
      // Pub/Sub mints the push requests' OIDC tokens as the push service account.
      push_token_creator: {
        service_account_id: ref("google_service_account", "push", "name"),
        role: "roles/iam.serviceAccountTokenCreator",
        member: pubsubAgent,
      },
    },
    google_pubsub_topic: {} as Json,
    google_pubsub_subscription: {} as Json,
    google_pubsub_topic_iam_member: {} as Json,
    google_pubsub_subscription_iam_member: {} as Json,
    google_project_iam_member: {} as Json,
    google_cloudfunctions2_function: {} as Json,
    google_cloud_run_service_iam_member: {} as Json,
    google_secret_manager_secret_iam_member: {} as Json,
    google_logging_metric: {} as Json,
  };
  const outputs: Json = { bridge_principal: { description: `The bridge (${s.bridge.namespace}/${bridgeName(s)}) as IAM knows it`, value: bridgePrincipal(s) } };
  for (const operator of operators) addOperator(r, outputs, operator, s, apiDeps);
  addLogMetrics(
    r.google_logging_metric,
    operators.map(({ operator }) => gcpNamesOf(operator, s).function),
    g.prefix,
  );
  return {
    terraform: {
      required_version: ">= 1.5",
      required_providers: {
        google: { source: "hashicorp/google", version: ">= 6.0" },
        archive: { source: "hashicorp/archive", version: ">= 2.4" },
        external: { source: "hashicorp/external", version: ">= 2.3" },
      },
    },
    provider: { google: { project: g.project, region: g.region } },
    variable: {
      source_dir: {
        type: "string",
        default: sourceDirFromTerraform(s, base),
        description:
          "The functions' source folder (its package.json main registers each operator's function; `crdfn bundle` bundles it for the upload), relative to this folder unless absolute",
      },
    },
    locals: {
      // The functions' cluster registry (CRDFN_CLUSTERS): the GKE cluster, reached with each function's own access token.
      clusters: {
        [s.cluster]: {
          auth: "gke",
          server: "https://${data.google_container_cluster.gke.endpoint}",
          caData: "${data.google_container_cluster.gke.master_auth[0].cluster_ca_certificate}",
        },
      },
    },
    data: {
      google_project: { this: { project_id: g.project } },
      google_container_cluster: { gke: { name: g.gkeCluster, location: g.gkeLocation } },
      // The upload: the source's main bundled with crdfn (cli/generate/bundle-command.ts), run by every
      // plan from the source folder, so Cloud Build installs registry packages only.
      external: {
        source: {
          program: ["npx", "--no", "crdfn", "bundle", "--terraform"],
          working_dir: "${var.source_dir}",
          query: { out: "${abspath(path.module)}/.build/source" },
        },
      },
      archive_file: {
        source: { type: "zip", source_dir: "${data.external.source.result.dir}", output_path: "${path.module}/.build/source.zip" },
      },
    },
    resource: Object.fromEntries(Object.entries(r).filter(([, v]) => Object.keys(v).length > 0)),
    output: outputs,
  };
}

/** A Terraform reference to a resource's attribute. */
const ref = (type: string, name: string, attr = "id") => `\${${type}.${name}.${attr}}`;

/** The resources by type, each a map of name → arguments. */
type Resources = Record<
  | "google_service_account"
  | "google_pubsub_topic"
  | "google_pubsub_subscription"
  | "google_pubsub_topic_iam_member"
  | "google_pubsub_subscription_iam_member"
  | "google_project_iam_member"
  | "google_cloudfunctions2_function"
  | "google_cloud_run_service_iam_member"
  | "google_secret_manager_secret_iam_member"
  | "google_logging_metric",
  Json
>;

/** One operator's topics, subscriptions, identity, grants and function, and its outputs. */
function addOperator(r: Resources, outputs: Json, { operator, entryPoint }: GcpOperator, s: CloudRunDeploySettings, apiDeps: string[]): void {
  const g = s.gcp;
  const n = gcpNamesOf(operator, s);
  const ids = pubSubIdsOf(g.prefix, operatorName(operator));
  const events = `${n.tf}_events`;
  const deadLetters = `${n.tf}_dead_letters`;
  const fnUri = ref("google_cloudfunctions2_function", n.tf, "service_config[0].uri");
  Object.assign(r.google_service_account, { [n.tf]: { account_id: n.accountId, display_name: `crdfn ${operator.resource.kind} function` } });
  Object.assign(r.google_pubsub_topic, {
    [events]: { name: ids.events, message_retention_duration: EVENT_RETENTION },
    [deadLetters]: { name: ids.deadLetters },
  });
  Object.assign(r.google_pubsub_subscription, {
    [events]: {
      name: ids.events,
      topic: ref("google_pubsub_topic", events),
      // One ordered stream per object: the bridge's ordering key (core/event.ts messageGroupId).
      enable_message_ordering: true,
      ack_deadline_seconds: ACK_DEADLINE_SECONDS,
      message_retention_duration: EVENT_RETENTION,
      expiration_policy: { ttl: "" },
      retry_policy: { minimum_backoff: `${PUSH_POLICY.minimumBackoffSeconds}s`, maximum_backoff: `${PUSH_POLICY.maximumBackoffSeconds}s` },
      dead_letter_policy: { dead_letter_topic: ref("google_pubsub_topic", deadLetters), max_delivery_attempts: PUSH_POLICY.maxDeliveryAttempts },
      push_config: { push_endpoint: fnUri, oidc_token: { service_account_email: ref("google_service_account", "push", "email"), audience: fnUri } },
      depends_on: [`google_cloud_run_service_iam_member.${n.tf}_invoker`],
    },
    [deadLetters]: {
      name: ids.deadLetters,
      topic: ref("google_pubsub_topic", deadLetters),
      ack_deadline_seconds: 60,
      message_retention_duration: DEAD_LETTER_RETENTION,
      expiration_policy: { ttl: "" },
    },
  });
  Object.assign(r.google_pubsub_topic_iam_member, {
    // The function re-sends a message deferred through an API server outage into its ordering key.
    [`${n.tf}_republish`]: {
      topic: ref("google_pubsub_topic", events),
      role: "roles/pubsub.publisher",
      member: `serviceAccount:${ref("google_service_account", n.tf, "email")}`,
    },
    [`${n.tf}_bridge_publish`]: { topic: ref("google_pubsub_topic", events), role: "roles/pubsub.publisher", member: bridgePrincipal(s) },
    // The bridge checks its topics exist (topics.get) and says so when one does not.
    [`${n.tf}_bridge_view`]: { topic: ref("google_pubsub_topic", events), role: "roles/pubsub.viewer", member: bridgePrincipal(s) },
    // Dead-lettering: Pub/Sub's own service agent forwards to the dead-letter topic…
    [`${n.tf}_dead_letter_forward`]: { topic: ref("google_pubsub_topic", deadLetters), role: "roles/pubsub.publisher", member: pubsubAgent },
  });
  Object.assign(r.google_pubsub_subscription_iam_member, {
    // …and acknowledges the forwarded message on the subscription.
    [`${n.tf}_dead_letter_ack`]: { subscription: ref("google_pubsub_subscription", events), role: "roles/pubsub.subscriber", member: pubsubAgent },
  });
  Object.assign(r.google_project_iam_member, {
    // GKE admits a Google identity that may get the cluster; Kubernetes RBAC grants the rest (functions/<operator>-gke.yaml).
    [`${n.tf}_gke_authentication`]: {
      project: g.project,
      role: "roles/container.clusterViewer",
      member: `serviceAccount:${ref("google_service_account", n.tf, "email")}`,
    },
  });
  Object.assign(r.google_cloudfunctions2_function, { [n.tf]: functionOf(operator, entryPoint, s, apiDeps) });
  Object.assign(r.google_secret_manager_secret_iam_member, {
    // Its own read of its operator's event keys, and nothing else of Secret Manager.
    [`${n.tf}_event_keys`]: {
      project: g.project,
      secret_id: eventKeysSecretId(s, operator),
      role: "roles/secretmanager.secretAccessor",
      member: `serviceAccount:${ref("google_service_account", n.tf, "email")}`,
    },
  });
  Object.assign(r.google_cloud_run_service_iam_member, {
    // Only the push subscription's identity may call the function.
    [`${n.tf}_invoker`]: {
      location: g.region,
      service: ref("google_cloudfunctions2_function", n.tf, "name"),
      role: "roles/run.invoker",
      member: `serviceAccount:${ref("google_service_account", "push", "email")}`,
    },
  });
  Object.assign(outputs, {
    [`${n.tf}_function_uri`]: { description: `The ${operator.resource.kind} function's URL (push endpoint)`, value: fnUri },
    [`${n.tf}_gke_user`]: {
      description: `The ${operator.resource.kind} function's user name in the GKE cluster`,
      value: ref("google_service_account", n.tf, "email"),
    },
  });
}

/** The operator's Cloud Run function (2nd gen): the uploaded bundle, its identity, settings and event keys. */
function functionOf(operator: GcpOperator["operator"], entryPoint: string, s: CloudRunDeploySettings, apiDeps: string[]): Json {
  const g = s.gcp;
  const n = gcpNamesOf(operator, s);
  const events = `${n.tf}_events`;
  return {
    name: n.function,
    location: g.region,
    description: `crdfn: reconciles ${operator.resource.plural}.${operator.resource.group}`,
    build_config: {
      runtime: g.runtime,
      entry_point: entryPoint,
      source: { storage_source: { bucket: ref("google_storage_bucket", "source", "name"), object: ref("google_storage_bucket_object", "source", "name") } },
    },
    service_config: {
      service_account_email: ref("google_service_account", n.tf, "email"),
      // Push comes from Google's front end: the function takes requests from anywhere, and
      // IAM refuses all but the push identity (run.invoker below; no allUsers).
      ingress_settings: "ALLOW_ALL",
      max_instance_count: g.maxInstances,
      timeout_seconds: FUNCTION_TIMEOUT_SECONDS,
      available_memory: FUNCTION_MEMORY,
      environment_variables: {
        CRDFN_CLUSTERS: "${jsonencode(local.clusters)}",
        CRDFN_PUBSUB_TOPIC: ref("google_pubsub_topic", events),
        CRDFN_MAX_DELIVERY_ATTEMPTS: String(PUSH_POLICY.maxDeliveryAttempts),
        CRDFN_RETRY_MIN_BACKOFF_SECONDS: String(PUSH_POLICY.minimumBackoffSeconds),
        CRDFN_RETRY_MAX_BACKOFF_SECONDS: String(PUSH_POLICY.maximumBackoffSeconds),
        LOG_LEVEL: "info",
        ...functionTracingEnv(s.tracing),
      },
      // Read as each instance starts: a new secret version reaches new instances (docs/security.md, rotation).
      secret_environment_variables: [{ key: "CRDFN_EVENT_KEYS", project_id: g.project, secret: eventKeysSecretId(s, operator), version: "latest" }],
    },
    depends_on: [...apiDeps, `google_secret_manager_secret_iam_member.${n.tf}_event_keys`],
  };
}

/** Log-based metrics over the lines the functions write (core/cloud-logging-metrics.ts). */
function addLogMetrics(metrics: Json, functionNames: string[], prefix: string): void {
  const scope = `resource.type="cloud_run_revision" AND resource.labels.service_name=(${functionNames.map((f) => `"${f}"`).join(" OR ")}) AND jsonPayload.${METRIC_MARKER.field}="${METRIC_MARKER.value}"`;
  const metricName = (name: string) => `${prefix.replace(/-$/, "")}/${name}`;
  const labelsOf = (labels: readonly string[]) => ({
    labels: labels.map((key) => ({ key, value_type: "STRING" })),
    extractors: Object.fromEntries(labels.map((key) => [key, `EXTRACT(jsonPayload.${key})`])),
  });
  for (const c of LOG_COUNTERS) {
    const l = labelsOf(c.labels);
    metrics[c.name] = {
      name: metricName(c.name),
      description: c.description,
      filter: c.condition ? `${scope} AND ${c.condition}` : scope,
      metric_descriptor: { metric_kind: "DELTA", value_type: "INT64", unit: "1", labels: l.labels },
      label_extractors: l.extractors,
    };
  }
  for (const d of LOG_DISTRIBUTIONS) {
    const l = labelsOf(["cluster", "controller"]);
    metrics[d.name] = {
      name: metricName(d.name),
      description: d.description,
      filter: `${scope} AND jsonPayload.${d.field}>=0`,
      metric_descriptor: { metric_kind: "DELTA", value_type: "DISTRIBUTION", unit: d.unit, labels: l.labels },
      label_extractors: l.extractors,
      value_extractor: `EXTRACT(jsonPayload.${d.field})`,
      bucket_options:
        d.unit === "s"
          ? { exponential_buckets: { num_finite_buckets: 16, growth_factor: 2, scale: 0.005 } }
          : { explicit_buckets: { bounds: [1, 2, 3, 4, 5, 6, 8, 10, 15, 20, 30, 50] } },
    };
  }
}

export function gcpReadme(operators: ReadonlyArray<GcpOperator>, s: CloudRunDeploySettings): string {
  const rows = operators.map(({ operator, entryPoint }) => {
    const n = gcpNamesOf(operator, s);
    return `| ${operator.resource.kind} | \`${n.function}\` (entry point \`${entryPoint}\`) | \`${n.pubsub.topic.split("/").pop()}\` | \`${n.pubsub.deadLetterTopic.split("/").pop()}\` | \`${n.email}\` |`;
  });
  return `<!-- Generated by \`crdfn generate\`. Do not edit. -->
# The functions on Cloud Run functions (project ${s.gcp.project}, ${s.gcp.region})

| operator | function | topic (ordered push subscription of the same name) | dead-letter topic and its pull subscription | service account = GKE user |
|---|---|---|---|---|
${rows.join("\n")}

Each push subscription delivers one object's messages in order (ordering key = object), retries a refused
delivery after ${PUSH_POLICY.minimumBackoffSeconds}–${PUSH_POLICY.maximumBackoffSeconds} s, dead-letters it after ${PUSH_POLICY.maxDeliveryAttempts} deliveries, and authenticates as
\`${pushAccountId(s)}\`, the only identity allowed to invoke the functions. Each function may publish
to its own topic (a message deferred through an API server outage goes back into its object's ordering key)
and get the GKE cluster \`${s.gcp.gkeCluster}\`; the cluster's RBAC (\`functions/<operator>-gke.yaml\`) grants it
what the operator's ServiceAccount has. The bridge \`${s.bridge.namespace}/${bridgeName(s)}\` publishes to those topics through GKE
Workload Identity Federation (the cluster needs Workload Identity enabled).

Each function verifies its operator's events with its operator's event keys (docs/security.md), derived
from the cluster's key (the one the bridge's Secret holds, bridge/README.md) and kept in a Secret Manager
secret of its own, which only that function's service account may read and which Terraform reads but
never creates (its state would hold the key). Create them first:

\`\`\`sh
${operators
  .map(
    ({ operator }) =>
      `printf '%s' "$key" | npx crdfn key derive --resource ${operatorResource(operator.resource)} | gcloud secrets create ${eventKeysSecretId(s, operator)} --project ${s.gcp.project} --data-file=-`,
  )
  .join("\n")}
cd ${posix.join(s.out, GCP_DIR)}
terraform init && terraform apply     # APIs, topics, subscriptions, service accounts, functions (the source: ${s.gcp.source})
cd - && kubectl apply --server-side -k ${s.out}
\`\`\`

The source folder's \`package.json\` \`main\` must register each function named above, e.g.
\`http("${operators[0]?.entryPoint ?? "greeting"}", httpHandler(operator))\` from \`crdfn/http\`. Every plan and apply bundles it
(\`npx crdfn bundle\`, run from \`${s.gcp.source}\`) into \`.build/source\`: one module holding your code and crdfn, and a
package.json that depends only on functions-framework and the Pub/Sub client from the npm registry, which Cloud Build
installs; the upload is the code on disk, as \`serverless deploy\` bundles it on AWS. The functions reach the GKE API server's
public endpoint; for a private one, give them Direct VPC egress.
`;
}
