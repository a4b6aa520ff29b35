// The whole crdfn pipeline on one machine — bridge, queue, poller, reconcile runtimes — over
// a cluster (any kubeconfig: the emulator's, kind's, a remote one) and a queue, given apart.
// `crdfn dev`, the benchmark and the end-to-end tests of a user's operator all run this, so what
// they show is what they share. Two targets: AWS's (SQS FIFO and the poller standing in for
// Lambda's event source) and Cloud Run's (Pub/Sub with an ordering key per object, push to a
// functions-framework server per operator: cloud-run.ts). Its other parts stand beside it:
// the CRDs (install-crds.ts), the identities as deployed (dev-identities.ts), and the bridge in a
// process of its own (bridge-process.ts).
import type { KubeConfig } from "@kubernetes/client-node";
import type { Logger } from "pino";
import type { Operator } from "../../core/operator.ts";
import { startBridge, type RunningBridge } from "../../bridge/bridge.ts";
import { pubSubPublisher, pubSubTransport } from "../../bridge/pubsub-transport.ts";
import { formatEventKey, operatorKey, operatorResource, type EventKey } from "../../core/event-auth.ts";
import { newEventKey } from "./event-key.ts";
import { loadBridgeConfig } from "../../bridge/config.ts";
import { type SqsEnvironment } from "../../emulator/cluster.ts";
import { sqsClient } from "../../clients/sqs-client.ts";
import type { SQSClient } from "@aws-sdk/client-sqs";
import { SetupError } from "../../emulator/errors.ts";
import { queueEnv } from "../../emulator/queues.ts";
import { startReaper, type Reaper } from "../../emulator/reaper.ts";
import type { LocalPubSub } from "../../emulator/pubsub.ts";
import { operatorName } from "../../deploy/rbac.ts";
import { pubSubNamesOf } from "../../deploy/queue-names.ts";
import { LOCAL_PUBSUB_PREFIX, startLocalCloudRun } from "./cloud-run.ts";
import type { PushRecord } from "../../emulator/pubsub-push.ts";
import { startPoller } from "../../functions/adapters/poller.ts";
import { crdName, crdOf } from "../../deploy/crd.ts";
import { installCrds } from "./install-crds.ts";
import { spawnBridge, type BridgeProcess } from "./bridge-process.ts";
import { bridgeSettingsOf, watchedResourcesOf } from "../../deploy/bridge.ts";
import { applyDevIdentities, type DevIdentities } from "./dev-identities.ts";
import { findUnserved, recordUnserved, unservedLine } from "../unserved.ts";
import { KubeHttp } from "../../clients/kube-http.ts";
import { startTracing, tracingSettings } from "../../clients/tracing.ts";
import { buildEach, buildFromEnv, type Built } from "../../functions/runtime/entry.ts";
import { givenSqsClient } from "../../functions/runtime/sqs-client.ts";
import { swappableRuntime, type HandledOutcome, type Runtime } from "../../functions/runtime/runtime.ts";
import type { Delivery } from "../../functions/runtime/delivery.ts";

/** One reconcile as a person watching `crdfn dev` sees it. */
export interface ReconcileRecord {
  kind: string;
  namespace?: string;
  name: string;
  reason?: string;
  outcome: HandledOutcome;
  latencyMs: number;
  /** Which receive of its message this was (the queue dead-letters it after MAX_RECEIVE_COUNT). */
  receiveCount?: number;
  /** The object's version the event announced. */
  resourceVersion?: string;
  generation?: number;
}

export const DEFAULT_RECEIVE_LOOPS = 4;

/** The Kubernetes side: whatever a kubeconfig reaches (a LocalCluster is one). */
export interface PipelineCluster {
  kubeConfig: KubeConfig;
  /** The same kubeconfig as a file, with the current context chosen, for the functions. */
  kubeconfigPath: string;
}

export interface PipelineOptions {
  cluster: PipelineCluster;
  /** AWS's target: the SQS queue the poller consumes (as Lambda's event source would). */
  queue?: SqsEnvironment;
  /**
   * Cloud Run's target instead: a Pub/Sub emulator. Each operator gets its topic, ordered push
   * subscription and dead-letter topic, and its function is served by functions-framework.
   */
  pubsub?: LocalPubSub;
  /** Server-side apply the operators' CRDs first. Default true. */
  installCrds?: boolean;
  /** Lines for the person running it (CRD versions kept). */
  log?: (line: string) => void;
  operators: ReadonlyArray<Operator<unknown>>;
  logger: Logger;
  /** Cluster name the bridge puts in every event. */
  clusterName?: string;
  /**
   * The key the bridge signs events with and the functions verify them with (crdfn dev keeps one
   * per state directory, so messages outlive a restart). Default: a new one for this pipeline.
   */
  eventKey?: EventKey;
  onReconcile?: (r: ReconcileRecord) => void;
  /** Function log level (their own pino loggers). Default "warn". */
  functionLogLevel?: string;
  /** Re-announce every object this often (seconds, 0 = never). Default 0. */
  resyncSeconds?: number;
  /**
   * Run the bridge as its own process, as its image runs it (the bundle, under the deployment's
   * NODE_OPTIONS), instead of in this one, so its memory and CPU can be measured apart (the
   * benchmark). Default false.
   */
  bridgeProcess?: boolean;
  /**
   * With bridgeProcess: Node flags added after the deployment's NODE_OPTIONS (the cold-start
   * benchmark's `--cpu-prof`). Default none.
   */
  bridgeExtraNodeOptions?: string;
  /**
   * With bridgeProcess: how long the bridge may take to report its initial sync on /readyz
   * (it lists and publishes every watched object first: ~4 minutes for 100k objects on a
   * loaded 2-core machine). Default 60 s.
   */
  bridgeReadyTimeoutMs?: number;
  /**
   * Concurrent receive loops on the FIFO event queue, like Lambda running several batches of
   * one queue at once. The queue never hands out a message of a group (an object) while
   * another of that group is in flight, so per-object order holds. One loop waits for the
   * slowest reconcile of each batch before receiving again, which caps a busy machine at a few
   * dozen reconciles/s (see `npm run bench`). Default DEFAULT_RECEIVE_LOOPS.
   */
  receiveLoops?: number;
  /**
   * Run as deployed (the default): the operators' generated identities and admission policies
   * are applied to the cluster, and the functions and the bridge use those identities' tokens,
   * serving `namespaces` (default ["default"]). The bridge's identity is crdfn-bridge-<project>
   * (default "dev"): one per project, so two projects in dev on one cluster keep each their own.
   * Their tokens live in `stateDir` (cli/local/dev-identities.ts). false: everything as the kubeconfig's user.
   */
  identities?: false | { namespaces?: readonly string[]; project?: string; stateDir?: string };
  /** Told the name of every request the poller and the functions make to the queue (the benchmark counts them). */
  onQueueRequest?: (command: string) => void;
  /** Cloud Run's target: told about every push request the local deliverer makes (the benchmark counts and times them). */
  onPush?: (push: PushRecord) => void;
  /**
   * One trace per change (`crdfn dev --trace`): the bridge's and the functions' spans exported to
   * this OTLP/HTTP endpoint (OTEL_EXPORTER_OTLP_ENDPOINT), under the service names they have as
   * deployed (crdfn-bridge; a function crdfn-<kind>). Default: the in-process bridge untraced,
   * the functions as their environment says.
   */
  tracing?: { otlpEndpoint: string };
}

const BRIDGE_SERVICE = "crdfn-bridge";

/** What points a process's OpenTelemetry SDK at the collector (clients/tracing.ts reads it). */
const tracingEnv = (o: PipelineOptions): Record<string, string> => (o.tracing ? { OTEL_EXPORTER_OTLP_ENDPOINT: o.tracing.otlpEndpoint } : {});

export interface Reloaded {
  /** CRDs re-applied because the new operators generate a different one. */
  crdsApplied: string[];
  /** The operators' watched or owned kinds changed: the running bridge still watches the old ones. */
  bridgeStale: boolean;
  /** Objects of the reloaded operators announced again, so they meet the new code now. */
  resynced: number;
  notes: string[];
}

export interface Pipeline {
  bridge: RunningBridge;
  /**
   * Swaps the reconcile runtime behind the poller for one built from `operators` (the bridge,
   * the queue and the cluster keep running); re-applies the CRDs that changed.
   */
  reload(operators: ReadonlyArray<Operator<unknown>>): Promise<Reloaded>;
  stop(): Promise<void>;
}

export interface ProcessPipeline {
  bridgeProcess: BridgeProcess;
  stop(): Promise<void>;
}

/** Reports each reconcile the runtime handles, for the live lines of `crdfn dev` and the benchmark. */
export function observed(runtime: Runtime, onReconcile?: (r: ReconcileRecord) => void): Runtime {
  if (!onReconcile) return runtime;
  return {
    ...runtime,
    async handle(delivery: Delivery): Promise<HandledOutcome> {
      const started = performance.now();
      const outcome = await runtime.handle(delivery);
      const { message } = delivery;
      if (delivery.ok) {
        const e = delivery.event;
        onReconcile({
          kind: e.kind,
          ...(e.namespace ? { namespace: e.namespace } : {}),
          name: e.name,
          ...(e.reason ? { reason: e.reason } : {}),
          outcome,
          latencyMs: performance.now() - started,
          resourceVersion: e.resourceVersion,
          generation: e.generation,
          ...(message.receiveCount === undefined ? {} : { receiveCount: message.receiveCount }),
        });
      }
      return outcome;
    },
  };
}

/** Each operator's topic on the Cloud Run target. */
const topicOf = (o: PipelineOptions, op: Operator<unknown>): string => pubSubNamesOf(o.pubsub!.projectId, LOCAL_PUBSUB_PREFIX, operatorName(op)).topic;

/** The bridge's settings file (what the generated ConfigMap holds), from the same function as deployed (deploy/bridge.ts). */
function bridgeFile(o: PipelineOptions, operators: ReadonlyArray<Operator<unknown>>): Record<string, unknown> {
  return bridgeSettingsOf(operators, {
    cluster: o.clusterName ?? "local",
    // On Cloud Run a topic per operator, as deployed; on SQS the one local queue.
    ...(o.pubsub
      ? { queue: { topic: topicOf(o, operators[0]!) }, destinationOf: (op: Operator<unknown>) => ({ topic: topicOf(o, op) }) }
      : { queue: { url: queueOf(o).queues.fifo } }),
    ...(o.identities === false ? {} : { namespaces: servedNamespaces(o) }),
    resyncSeconds: o.resyncSeconds ?? 0,
  });
}

/** The queue's endpoint, for the bridge's process entry. */
function bridgeEnv(o: PipelineOptions): Record<string, string> {
  if (o.pubsub) return { PUBSUB_EMULATOR_HOST: o.pubsub.host };
  return { AWS_REGION: queueOf(o).region, AWS_ENDPOINT_URL_SQS: queueOf(o).endpoint };
}

/** The SQS environment of the AWS target (the options say one of queue and pubsub). */
function queueOf(o: PipelineOptions): SqsEnvironment {
  if (!o.queue) throw new SetupError("the pipeline needs a queue (SQS) or a Pub/Sub emulator");
  return o.queue;
}

/** The namespaces served when running as deployed: default unless told. */
const servedNamespaces = (o: PipelineOptions): readonly string[] => (o.identities === false ? [] : (o.identities?.namespaces ?? ["default"]));

/** What points a process (the bridge's, the functions') at the cluster and the queue. */
function processEnv(o: PipelineOptions): Record<string, string> {
  return { KUBECONFIG: o.cluster.kubeconfigPath, ...(o.pubsub ? o.pubsub.env : queueEnv(queueOf(o))) };
}

/** An operator's event key, derived from the cluster's (the bridge's): what its function holds, as deployed. */
const operatorKeyOf = (o: { eventKey: EventKey }, op: Operator<unknown>): string => formatEventKey(operatorKey(o.eventKey, operatorResource(op.resource)));

/** One function process's keys for `ops`: each operator's own, named by its resource (CRDFN_EVENT_KEYS). */
const functionKeys = (o: { eventKey: EventKey }, ops: ReadonlyArray<Operator<unknown>>): string =>
  ops.map((op) => `${operatorResource(op.resource)}:${operatorKeyOf(o, op)}`).join(",");

/** Starts the bridge as its own process (bridge-process.ts), with the settings and environment it has here. */
function spawnBridgeOf(o: PipelineOptions & { eventKey: EventKey }, ids: DevIdentities | undefined): Promise<BridgeProcess & { stop(): Promise<void> }> {
  return spawnBridge({
    settings: bridgeFile(o, o.operators),
    env: {
      // As deployed: its ServiceAccount's token, as in a pod; else the kubeconfig.
      ...(ids ? { ...(o.pubsub ? {} : queueEnv(queueOf(o))), ...ids.bridgeEnv } : processEnv(o)),
      // The cluster's key: the bridge alone holds it, and signs each event with its operator's.
      CRDFN_EVENT_KEY: formatEventKey(o.eventKey),
      ...bridgeEnv(o),
      ...tracingEnv(o),
    },
    logLevel: o.logger.level === "silent" ? "fatal" : o.logger.level,
    ...(o.bridgeExtraNodeOptions ? { extraNodeOptions: o.bridgeExtraNodeOptions } : {}),
    ...(o.bridgeReadyTimeoutMs === undefined ? {} : { readyTimeoutMs: o.bridgeReadyTimeoutMs }),
  });
}

export function startPipeline(o: PipelineOptions & { bridgeProcess: true }): Promise<ProcessPipeline>;
export function startPipeline(o: PipelineOptions & { bridgeProcess?: false }): Promise<Pipeline>;
export async function startPipeline(given: PipelineOptions): Promise<Pipeline | ProcessPipeline> {
  const o = { ...given, eventKey: given.eventKey ?? newEventKey() };
  if ((o.queue === undefined) === (o.pubsub === undefined)) throw new SetupError("the pipeline needs a queue (SQS) or a Pub/Sub emulator, one of them");
  if (o.installCrds ?? true) for (const note of await installCrds(o.cluster.kubeConfig, o.operators)) o.log?.(note);
  const sqs = o.queue ? counted(sqsClient(o.queue), o.onQueueRequest) : undefined;
  // Validated here in either mode, so a bad setting fails before anything is started.
  const bridgeConfig = loadBridgeConfig(bridgeEnv(o), bridgeFile(o, o.operators));
  // Removes the identities' token folder if this process is killed before its stop (SIGKILL).
  const tokenReaper = o.identities === false ? undefined : startReaper();
  const ids = tokenReaper === undefined ? undefined : await devIdentitiesOf(o, tokenReaper);

  // The functions serve exactly the cluster the bridge names in its events.
  const functionEnv = {
    ...process.env,
    ...processEnv(o),
    LOG_LEVEL: o.functionLogLevel ?? "warn",
    CRDFN_KUBE_AUTH: "kubeconfig",
    CRDFN_CLUSTER: bridgeConfig.cluster,
    ...tracingEnv(o),
  };
  // One function process serving every operator, dispatching by the resource each event names;
  // as deployed, each operator's runtime with its own identity.
  let operators = o.operators;
  const countSqs = { onSqsClient: (client: SQSClient) => void counted(client, o.onQueueRequest) };
  const build = (ops: ReadonlyArray<Operator<unknown>>): { runtime: Runtime; built: Built[] } => {
    // Each function holds its own operator's key only (as deployed), or the one host each operator's.
    if (ids)
      return buildEach(ops, (op) => ({ ...functionEnv, KUBECONFIG: undefined, ...ids.functionEnv(op), CRDFN_EVENT_KEYS: operatorKeyOf(o, op) }), countSqs);
    const one = buildFromEnv(ops, { ...functionEnv, CRDFN_EVENT_KEYS: functionKeys(o, ops) }, countSqs);
    return { runtime: one.runtime, built: [one] };
  };
  let { runtime, built: functions } = build(operators);
  // Reloaded runtimes may still finish a message in hand: their clients close at stop.
  const retired: Built[] = [];
  const current: Runtime = swappableRuntime(() => runtime);
  // As deployed, each operator's function runs with its own identity: its own runtime.
  const runtimeOfKind = (kind: string): Runtime => {
    const i = operators.findIndex((op) => op.resource.kind === kind);
    return ids && i >= 0 && functions[i] ? functions[i].runtime : runtime;
  };
  const consumer = o.pubsub ? await startCloudRunConsumer(o, o.pubsub, runtimeOfKind) : startSqsConsumer(o, queueOf(o), sqs!, current);
  const stopFunctions = async () => {
    await consumer.stop();
    for (const built of [...retired, ...functions]) built.sqs.destroy();
    // Their last spans reach the collector before it may stop.
    await Promise.all([...retired, ...functions].map((built) => built.shutdownTraces(2000)));
    sqs?.destroy();
    ids?.stop();
    await tokenReaper?.release();
  };

  if (o.bridgeProcess) {
    const bridgeProcess = await spawnBridgeOf(o, ids).catch(async (e: unknown) => {
      await stopFunctions();
      throw e;
    });
    await reportUnserved(o);
    return {
      bridgeProcess: { pid: bridgeProcess.pid, httpPort: bridgeProcess.httpPort, logFile: bridgeProcess.logFile },
      async stop() {
        await bridgeProcess.stop();
        await stopFunctions();
      },
    };
  }
  const transport = o.pubsub ? pubSubTransport(pubSubPublisher({ apiEndpoint: o.pubsub.host })) : undefined;
  // As bridge/run.ts builds it for the deployed bridge, from the same settings.
  const tracing = await startTracing(tracingSettings(tracingEnv(o), BRIDGE_SERVICE));
  const bridge = startBridge(bridgeConfig, {
    kubeConfig: ids?.bridgeConnection ?? o.cluster.kubeConfig,
    ...(transport ? { transport } : { sqs: sqs! }),
    logger: o.logger.child({ part: "bridge" }),
    eventKey: o.eventKey,
    ...(ids ? { credentialSource: "the dev bridge identity's ServiceAccount token" } : {}),
    ...(tracing.enabled ? { tracer: tracing.tracer } : {}),
  });
  await bridge.ready;
  await reportUnserved(o);
  return {
    bridge,
    async reload(next) {
      const crdText = (op: Operator<unknown>) => JSON.stringify(crdOf(op));
      const before = new Map(operators.map((op) => [crdName(op), crdText(op)]));
      const changed = next.filter((op) => before.get(crdName(op)) !== crdText(op));
      const notes = (o.installCrds ?? true) ? await installCrds(o.cluster.kubeConfig, changed) : [];
      const { runtime: nextRuntime, built } = build(next);
      const watched = (ops: ReadonlyArray<Operator<unknown>>) => JSON.stringify(watchedResourcesOf(ops));
      const bridgeStale = watched(next) !== watched(operators);
      retired.push(...functions);
      functions = built;
      runtime = nextRuntime;
      const reloaded = next.filter((op) => !operators.includes(op));
      operators = next;
      let resynced = 0;
      for (const op of reloaded) resynced += await bridge.resync({ group: op.resource.group, plural: op.resource.plural });
      return { crdsApplied: changed.map(crdName), bridgeStale, notes, resynced };
    },
    async stop() {
      await bridge.stop();
      await transport?.close();
      await stopFunctions();
      // The last changes' spans reach the viewer before it stops.
      await tracing.shutdown(2000);
    },
  };
}

/** The identities as deployed (cli/local/dev-identities.ts), their tokens' folder reaped if this process dies. */
async function devIdentitiesOf(o: PipelineOptions, tokenReaper: Reaper): Promise<DevIdentities> {
  return applyDevIdentities({
    kubeConfig: o.cluster.kubeConfig,
    operators: o.operators,
    namespaces: servedNamespaces(o),
    project: (o.identities === false ? undefined : o.identities?.project) ?? "dev",
    ...(o.identities !== false && o.identities?.stateDir ? { stateDir: o.identities.stateDir } : {}),
    reaper: tokenReaper,
    ...(o.log ? { log: o.log } : {}),
  }).catch(async (e: unknown) => {
    await tokenReaper.release();
    throw e;
  });
}

/**
 * Says which objects of the operators' kinds sit in namespaces not served (cli/unserved.ts): a
 * line each and a NamespaceNotServed Event on each, as the kubeconfig's user (the bridge's
 * identity cannot look outside its namespaces). Looking is best effort: a failure is one line.
 */
async function reportUnserved(o: PipelineOptions): Promise<void> {
  const served = servedNamespaces(o);
  if (served.length === 0) return;
  const http = new KubeHttp({ connection: o.cluster.kubeConfig });
  try {
    for (const u of await findUnserved(http, o.operators, served)) {
      o.log?.(unservedLine(u, served));
      await recordUnserved(http, u, served, new Date());
    }
  } catch (e) {
    o.log?.(
      `! could not look for ${o.operators.map((op) => op.resource.kind).join(", ")} objects in namespaces not served: ${(e as Error).message.split("\n")[0]}`,
    );
  }
}

/** AWS's target: the poller, as Lambda's SQS event source, on the one local FIFO queue. */
function startSqsConsumer(o: PipelineOptions, queue: SqsEnvironment, sqs: SQSClient, current: Runtime): { stop(): Promise<void> } {
  return startPoller({
    sqs: givenSqsClient(sqs),
    queueUrls: Array.from({ length: o.receiveLoops ?? DEFAULT_RECEIVE_LOOPS }, () => queue.queues.fifo),
    runtime: observed(current, o.onReconcile),
    waitTimeSeconds: 1,
    logger: o.logger.child({ part: "poller" }),
    clock: () => new Date(),
  });
}

/**
 * Cloud Run's target: per operator its Pub/Sub resources, a functions-framework server and the
 * push deliverer. Behind each server is its operator's current runtime (built with that
 * operator's identity), looked up per request, so a reload swaps it.
 */
async function startCloudRunConsumer(o: PipelineOptions, pubsub: LocalPubSub, runtimeOfKind: (kind: string) => Runtime): Promise<{ stop(): Promise<void> }> {
  const runtimes = new Map(
    o.operators.map((op) => [
      op.resource.kind,
      observed(
        swappableRuntime(() => runtimeOfKind(op.resource.kind)),
        o.onReconcile,
      ),
    ]),
  );
  return startLocalCloudRun({
    pubsub,
    operators: o.operators,
    runtimeOf: (op) => runtimes.get(op.resource.kind)!,
    logger: o.logger.child({ part: "functions" }),
    log: (line) => o.logger.info({ part: "push" }, line),
    ...(o.onPush ? { onPush: o.onPush } : {}),
  });
}

/** Reports each request `client` sends, by command name, to `on`. */
function counted(client: SQSClient, on: ((command: string) => void) | undefined): SQSClient {
  if (on) {
    client.middlewareStack.add(
      (next, context) => (args) => {
        on(context.commandName ?? "unknown");
        return next(args);
      },
      { step: "initialize", name: "crdfnCountRequests" },
    );
  }
  return client;
}
