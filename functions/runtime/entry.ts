// Builds everything a function process needs from its environment. Only entry points call
// this (Lambda handler on first invocation, functions-framework start-up, the local poller).
import { readFileSync } from "node:fs";
import type { SQSClient } from "@aws-sdk/client-sqs";
import type { Tracer } from "@opentelemetry/api";
import { pino, type Logger } from "pino";
import type { AwsCredentialIdentityProvider } from "@smithy/types";
import { operatorResource, type EventSecret } from "../../core/event-auth.ts";
import type { Operator } from "../../core/operator.ts";
import { loadClusterRegistry, loadEventKeyrings, type ClusterRegistry, type EventKeyrings } from "../clusters/registry.ts";
import { clusterAccess } from "../credentials/access.ts";
import { ConfigError } from "../../core/config-error.ts";
import { loadConfig, type FunctionConfig } from "./config.ts";
import { createKubeApi } from "./kube-api-http.ts";
import { createEmfMetrics } from "./emf-metrics.ts";
import type { RuntimeMetrics } from "./metrics.ts";
import { createRuntime, runtimeByCluster, runtimeByResource, type Runtime } from "./runtime.ts";
import { eventKeysSource, type EventKeysSource } from "./event-keys-source.ts";
import { lazySqsClient, type LazySqsClient } from "./sqs-client.ts";
import { startTracing, tracingOff, tracingSettings, type Tracing } from "../../clients/tracing.ts";

/**
 * How long a host waits for its spans to be exported before it may be frozen (a Lambda's return,
 * a Cloud Run answer): a collector that is down or slow costs each at most this, and the work's
 * answer stands regardless.
 */
export const TRACE_FLUSH_MS = 1000;

export interface Built {
  config: FunctionConfig;
  clusters: ClusterRegistry;
  runtime: Runtime;
  /** Built on its first use (sqs-client.ts): deferring a message during an outage, retry backoff. */
  sqs: LazySqsClient;
  logger: Logger;
  clock: () => Date;
  /**
   * Brings the event keys up to date before a batch is judged: from CRDFN_EVENT_KEYS_SECRET, the
   * first call fetches them (cold start) and later ones again once the cached copy is older than
   * its TTL. Rejects with EventKeysUnavailable (an outage: retry the batch) or ConfigError (the
   * secret's text is wrong).
   */
  refreshKeys: () => Promise<void>;
  /**
   * Exports the spans ended so far, within `timeoutMs` (clients/tracing.ts): a host calls it before
   * it may be frozen (a Lambda before its invocation returns, Cloud Run before it answers). A
   * collector down costs at most the bound, and never fails the work. Nothing to do untraced.
   */
  flushTraces: (timeoutMs: number) => Promise<void>;
  /** Flushes and stops exporting: a host that stops (the local poller). */
  shutdownTraces: (timeoutMs: number) => Promise<void>;
  /** The tracer of a host's own spans (a settlement), once tracing has started; undefined untraced. */
  tracer: () => Promise<Tracer | undefined>;
}

/** One operator, or several sharing a queue. */
export type Served = Operator<unknown> | ReadonlyArray<Operator<unknown>>;

/** Throws ConfigError (one line naming the setting) when the environment is wrong. */
export function buildFromEnv(
  served: Served,
  env: NodeJS.ProcessEnv,
  opts: {
    metrics?: (cluster: string) => RuntimeMetrics;
    logger?: Logger;
    onSqsClient?: (client: SQSClient) => void;
    /** The host calls refreshKeys before judging each batch (the Lambda adapter does): only then may the keys be fetched. */
    refreshesKeys?: boolean;
    /** The tracing to use; default: what the environment's OTEL_* settings ask for (off without an endpoint). */
    tracing?: Tracing;
  } = {},
): Built {
  const operators = Array.isArray(served) ? (served as ReadonlyArray<Operator<unknown>>) : [served as Operator<unknown>];
  const config = loadConfig(env);
  // A host that never refreshes would hold no key and refuse every event: say so at start instead.
  if (config.CRDFN_EVENT_KEYS_SECRET !== undefined && !opts.refreshesKeys)
    throw new ConfigError("invalid setting CRDFN_EVENT_KEYS_SECRET: read on AWS Lambda only; here give the keys in CRDFN_EVENT_KEYS");
  const clusters = loadClusterRegistry(config, (path) => readFileSync(path, "utf8"));
  const clock = () => new Date();
  const logger = opts.logger ?? pino({ level: config.LOG_LEVEL });
  // A wrong setting is refused here, in one line; the SDK loads (only when on) while the first
  // event's cluster client is built, which waits for it.
  const settings = opts.tracing ? undefined : tracingSettings(env, `crdfn-${operators.map((o) => o.resource.kind.toLowerCase()).join("-")}`);
  const tracing: Promise<Tracing> = opts.tracing
    ? Promise.resolve(opts.tracing)
    : startTracing(settings).catch((error: unknown) => {
        logger.error({ error: (error as Error).message }, `cannot start tracing, so nothing is traced: ${(error as Error).message}`);
        return tracingOff();
      });
  // Everything from the given environment (the SDK's chain would read process.env instead).
  const { AWS_ACCESS_KEY_ID: accessKeyId, AWS_SECRET_ACCESS_KEY: secretAccessKey, AWS_SESSION_TOKEN: sessionToken } = env;
  let chain: AwsCredentialIdentityProvider | undefined;
  // One chain for SQS and every EKS cluster: the same role signs all their tokens. Lambda puts
  // its role's keys in the environment, so the SDK's chain is loaded only where it does not.
  const awsCredentials = (): AwsCredentialIdentityProvider =>
    (chain ??=
      accessKeyId && secretAccessKey ? () => Promise.resolve({ accessKeyId, secretAccessKey, ...(sessionToken ? { sessionToken } : {}) }) : defaultChain());
  const resources = operators.map((operator) => operatorResource(operator.resource));
  // Each operator's own keys: one process may serve several (one queue), each verifying its own events only.
  const { eventKeys, refreshKeys } =
    config.CRDFN_EVENT_KEYS_SECRET === undefined
      ? { eventKeys: loadEventKeyrings(config.CRDFN_EVENT_KEYS, clusters, resources), refreshKeys: () => Promise.resolve() }
      : liveKeyrings(eventKeysSource(config, awsCredentials), clusters, resources);
  const sqs = lazySqsClient(
    {
      ...(config.AWS_REGION ? { region: config.AWS_REGION } : {}),
      ...(config.AWS_ENDPOINT_URL_SQS ? { endpoint: config.AWS_ENDPOINT_URL_SQS } : {}),
      credentials: awsCredentials(),
    },
    opts.onSqsClient,
  );
  // On Lambda, CloudWatch EMF (flushed by the adapter once per invocation); elsewhere what the
  // caller records them in (the local poller: Prometheus).
  const emf = config.AWS_LAMBDA_FUNCTION_NAME
    ? createEmfMetrics({ namespace: config.POWERTOOLS_METRICS_NAMESPACE, serviceName: config.AWS_LAMBDA_FUNCTION_NAME, clock })
    : undefined;
  const metricsOf = (cluster: string): RuntimeMetrics | undefined => (emf ? emf.forCluster(cluster) : opts.metrics?.(cluster));
  // Per cluster, on its first event: one client (keep-alive agent, token cache), its logger and
  // metrics labelled with the cluster, and a runtime per operator over them.
  const buildCluster = async (cluster: string): Promise<Runtime> => {
    const entry = clusters.get(cluster);
    const rings = eventKeys.get(cluster);
    if (!entry || !rings) throw new Error(`cluster ${cluster} is not in the registry`);
    const { enabled, tracer } = await tracing;
    // Untraced, nothing is handed a tracer: no span is made, not even a no-op one.
    const traced = enabled ? { tracer } : {};
    const api = createKubeApi(await clusterAccess(entry, { clock, awsCredentials, env, ...(config.AWS_REGION ? { region: config.AWS_REGION } : {}) }), traced);
    const log = logger.child({ cluster });
    const metrics = metricsOf(cluster);
    return runtimeByResource(
      operators.map((operator) =>
        createRuntime(operator, {
          api,
          ...(metrics ? { metrics } : {}),
          logger: log.child({ operator: operator.resource.kind }),
          clock,
          env,
          cluster,
          ...traced,
          eventKeys: rings.get(operatorResource(operator.resource))!,
        }),
      ),
      log,
    );
  };
  const routed = runtimeByCluster(
    eventKeys,
    operators.map((operator) => operator.resource),
    buildCluster,
    logger,
  );
  const runtime: Runtime = emf ? { ...routed, flushMetrics: () => emf.flush() } : routed;
  return {
    config,
    clusters,
    runtime,
    sqs,
    logger,
    clock,
    refreshKeys,
    flushTraces: async (timeoutMs) => (await tracing).flush(timeoutMs),
    shutdownTraces: async (timeoutMs) => (await tracing).shutdown(timeoutMs),
    tracer: async () => ((await tracing).enabled ? (await tracing).tracer : undefined),
  };
}

/**
 * Keyrings filled from `source` by refreshKeys, changed in place: the runtimes built over them (one
 * per cluster, on its first event) see a rotation without being built again. Empty until the
 * first refresh, so nothing verifies before the keys are read.
 */
function liveKeyrings(
  source: EventKeysSource,
  clusters: ClusterRegistry,
  resources: readonly string[],
): { eventKeys: EventKeyrings; refreshKeys: () => Promise<void> } {
  const live = new Map<string, Map<string, Map<string, EventSecret>>>(
    [...clusters.keys()].map((cluster) => [cluster, new Map(resources.map((r) => [r, new Map<string, EventSecret>()]))]),
  );
  let loaded: string | undefined;
  const refreshKeys = async () => {
    const text = await source();
    if (text === loaded) return;
    const next = loadEventKeyrings(text, clusters, resources, "CRDFN_EVENT_KEYS_SECRET (its SecretString)");
    for (const [cluster, rings] of live)
      for (const [resource, ring] of rings) {
        ring.clear();
        for (const [kid, secret] of next.get(cluster)!.get(resource)!) ring.set(kid, secret);
      }
    loaded = text;
  };
  return { eventKeys: live, refreshKeys };
}

/**
 * Each operator built from its own environment (its own identity: a token of its own), behind one
 * runtime that routes each event to its operator's: a local function host running every
 * operator's function as the function deployed for it would run.
 */
export function buildEach(
  operators: ReadonlyArray<Operator<unknown>>,
  envOf: (operator: Operator<unknown>) => NodeJS.ProcessEnv,
  opts: Parameters<typeof buildFromEnv>[2] = {},
): { runtime: Runtime; built: Built[] } {
  const built = operators.map((op) => buildFromEnv(op, envOf(op), opts));
  const runtime = runtimeByResource(
    built.map((b) => b.runtime),
    built[0]!.logger,
  );
  return { runtime, built };
}

/** Every built function's refreshKeys, together. */
export function refreshAll(built: readonly Built[]): () => Promise<void> {
  return async () => {
    await Promise.all(built.map((b) => b.refreshKeys()));
  };
}

/** The SDK's default credential chain (files, SSO, container and instance roles), loaded on its first use. */
function defaultChain(): AwsCredentialIdentityProvider {
  let provider: Promise<AwsCredentialIdentityProvider> | undefined;
  return async (props) => (await (provider ??= import("@aws-sdk/credential-provider-node").then((m) => m.defaultProvider())))(props);
}
