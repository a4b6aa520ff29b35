// Shared set-up for the functions' end-to-end tests: a real cluster and queue, the CRDs installed,
// key events published the way the bridge does (core/event.ts is the interface between the two).
import { Writable } from "node:stream";
import type { Tracer } from "@opentelemetry/api";
import { PurgeQueueCommand, ReceiveMessageCommand, SendMessageCommand, type SQSClient, type Message } from "@aws-sdk/client-sqs";
import { CoreV1Api, CustomObjectsApi } from "@kubernetes/client-node";
import { pino, type Logger } from "pino";
import { Registry } from "prom-client";
import type { SQSEvent, SQSRecord } from "aws-lambda";
import { deduplicationId, encodeKeyEvent, messageGroupId, PARENT_UID_LABEL, type ChildKey, type KeyEvent } from "../../core/event.ts";
import { apiVersionOf, type Operator } from "../../core/operator.ts";
import { appliedHashOf } from "../../core/reconciled.ts";
import { startBridge, type RunningBridge } from "../../bridge/bridge.ts";
import { loadBridgeConfig } from "../../bridge/config.ts";
import { crdOf } from "../../deploy/crd.ts";
import { sqsClient } from "../../clients/sqs-client.ts";
import { startPoller, type Poller } from "../../functions/adapters/poller.ts";
import { givenSqsClient } from "../../functions/runtime/sqs-client.ts";
import { createKubeApi } from "../../functions/runtime/kube-api-http.ts";
import type { KubeApi, KubeObject } from "../../functions/runtime/kube-api.ts";
import { createRuntimeMetrics } from "../../functions/runtime/prometheus-metrics.ts";
import { createRuntime, type Runtime } from "../../functions/runtime/runtime.ts";
import { applyDevIdentities, type DevIdentities } from "../../cli/local/dev-identities.ts";
import { testCluster, type TestCluster, type TestClusterOptions } from "./test-cluster.ts";
import { signedForTest, TEST_EVENT_KEY, testRuntimeKeys } from "./event-key.ts";

export const CLUSTER = "test";

export interface Env {
  /** Its namespace (cluster.namespace) is where the test's objects live and what the functions serve. */
  cluster: TestCluster;
  sqs: SQSClient;
  api: KubeApi;
  custom: CustomObjectsApi;
  core: CoreV1Api;
  /** Every log line the functions wrote, parsed (for measuring API calls per reconcile). */
  logs: Array<Record<string, unknown>>;
  logger: Logger;
  /** The functions' Prometheus metrics. */
  registry: Registry;
  /** The operators' generated identities and admission policies, applied: the runtimes run as them. */
  identities: DevIdentities | undefined;
}

export interface EnvOptions extends TestClusterOptions {
  /** The namespaces the functions serve (their identities' Roles and admission policies); default the file's own. */
  served?: (cluster: TestCluster) => string[];
  /** Apply the operators' generated identities (default true); false: everything runs as the admin. */
  identities?: boolean;
}

/**
 * A cluster and queue (see test-cluster.ts: shared unless `own`) with the operators' CRDs
 * installed and, as deployed, their generated identities and admission policies (serving
 * `namespaces`, default the file's own namespace): a runtime from runtimeFor() writes with its
 * function's own token, so the API server refuses what production refuses.
 */
export async function startEnv(operators: ReadonlyArray<Operator<unknown>>, o: EnvOptions): Promise<Env> {
  const { served, identities: withIdentities, ...where } = o;
  const cluster = await testCluster(where);
  const logs: Array<Record<string, unknown>> = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString("utf8").split("\n")) if (line) logs.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  const logger = pino({ level: "debug" }, sink);
  const sqs = sqsClient(cluster.sqs);
  const api = createKubeApi({ connection: cluster.kubeConfig });
  let identities: DevIdentities | undefined;
  try {
    for (const op of operators) await installCrd(api, op);
    identities =
      withIdentities === false
        ? undefined
        : await applyDevIdentities({ kubeConfig: cluster.kubeConfig, operators, namespaces: served?.(cluster) ?? [cluster.namespace], project: "test" });
  } catch (e) {
    // Nothing else will stop the cluster (the caller has no environment to stop).
    await cluster.stop();
    throw e;
  }
  // Stopping the cluster stops refreshing the identities' tokens and removes their files.
  const stoppable = { ...cluster, stop: async () => (identities?.stop(), cluster.stop()) };
  return {
    cluster: stoppable,
    sqs,
    api,
    custom: cluster.kubeConfig.makeApiClient(CustomObjectsApi),
    core: cluster.kubeConfig.makeApiClient(CoreV1Api),
    logs,
    logger,
    registry: new Registry(),
    identities,
  };
}

export async function installCrd(api: KubeApi, op: Operator<unknown>): Promise<void> {
  const crd = crdOf(op) as unknown as KubeObject;
  const ref = { group: "apiextensions.k8s.io", version: "v1", plural: "customresourcedefinitions", name: crd.metadata.name };
  await api.apply(ref, crd, "crdfn-test");
  await waitFor(`CRD ${crd.metadata.name} established`, async () => {
    const got = await api.get(ref);
    const conditions = (got?.status as { conditions?: Array<{ type: string; status: string }> } | undefined)?.conditions ?? [];
    return conditions.some((c) => c.type === "Established" && c.status === "True");
  });
  // Discovery lags the Established condition by a moment; a list proves the endpoint serves.
  await waitFor(`${op.resource.plural} served`, async () => {
    try {
      await api.get({ group: op.resource.group, version: op.resource.version, plural: op.resource.plural, namespace: "default" });
      return true;
    } catch {
      return false;
    }
  });
}

/**
 * The real bridge on the environment's FIFO queue, watching `resources` (CRDFN_RESOURCES syntax),
 * no resync; as the admin, or `asDeployed`: with its own ServiceAccount's token, watching the served namespace.
 */
export async function startTestBridge(
  env: Env,
  resources: string,
  o: { asDeployed?: boolean; settings?: Record<string, string>; tracer?: Tracer } = {},
): Promise<RunningBridge> {
  const { sqs: q } = env.cluster;
  const config = loadBridgeConfig({
    CRDFN_CLUSTER: CLUSTER,
    CRDFN_QUEUE_URL: q.queues.fifo,
    CRDFN_RESOURCES: resources,
    // On a shared control plane, only the file's own namespaces: other files' objects are there too.
    ...(env.cluster.shared ? { CRDFN_NAMESPACES: env.cluster.namespaces.join(",") } : o.asDeployed ? { CRDFN_NAMESPACES: env.cluster.namespace } : {}),
    CRDFN_RESYNC_SECONDS: "0",
    CRDFN_HTTP_PORT: "0",
    AWS_REGION: q.region,
    AWS_ENDPOINT_URL_SQS: q.endpoint,
    ...o.settings,
  });
  if (o.asDeployed && !env.identities) throw new Error("startTestBridge asDeployed: the environment has no identities");
  const kubeConfig = o.asDeployed && env.identities ? env.identities.bridgeConnection : env.cluster.kubeConfig;
  const bridge = startBridge(config, {
    eventKey: TEST_EVENT_KEY,
    kubeConfig,
    sqs: env.sqs,
    logger: env.logger.child({ component: "bridge" }),
    ...(o.tracer ? { tracer: o.tracer } : {}),
  });
  await bridge.ready;
  return bridge;
}

export function runtimeFor(env: Env, op: Operator<unknown>, opts: { api?: KubeApi; tracer?: Tracer } = {}): Runtime {
  const clock = () => new Date();
  const asDeployed = env.identities ? createKubeApi({ connection: env.identities.functionConnection(op) }) : env.api;
  return createRuntime(op, {
    api: opts.api ?? asDeployed,
    logger: env.logger,
    metrics: createRuntimeMetrics(env.registry, CLUSTER),
    clock,
    ...testRuntimeKeys(op, CLUSTER),
    ...(opts.tracer ? { tracer: opts.tracer } : {}),
  });
}

/**
 * A poller on the file's event queue. Visibility: 2 s by default (a message whose settling failed
 * comes back quickly), or "queue" for the queue's own (30 s locally), which several loops need:
 * each message in hand is extended every third of it until its settlement lands, and one that
 * lapses anyway (a reconcile holding the thread) is not handled twice (functions/adapters/leases.ts).
 */
export function pollerFor(env: Env, runtime: Runtime, visibility: number | "queue" = 2, loops = 1): Poller {
  const { fifo } = env.cluster.sqs.queues;
  return startPoller({
    sqs: givenSqsClient(env.sqs),
    queueUrls: Array.from({ length: loops }, () => fifo),
    runtime,
    batchSize: 10,
    waitTimeSeconds: 1,
    ...(visibility === "queue" ? {} : { visibilityTimeout: visibility }),
    logger: env.logger,
    clock: () => new Date(),
  });
}

/** The event Lambda's SQS event source would hand the function for these received messages. */
export function lambdaEvent(messages: Message[], queueUrl: string): SQSEvent {
  const queueName = queueUrl.split("/").pop() ?? "";
  return {
    Records: messages.map((m): SQSRecord => ({
      messageId: m.MessageId ?? "",
      receiptHandle: m.ReceiptHandle ?? "",
      body: m.Body ?? "",
      attributes: {
        ApproximateReceiveCount: m.Attributes?.ApproximateReceiveCount ?? "1",
        SentTimestamp: m.Attributes?.SentTimestamp ?? "0",
        SenderId: m.Attributes?.SenderId ?? "local",
        ApproximateFirstReceiveTimestamp: m.Attributes?.ApproximateFirstReceiveTimestamp ?? "0",
        ...(m.Attributes?.MessageGroupId ? { MessageGroupId: m.Attributes.MessageGroupId } : {}),
        ...(m.Attributes?.MessageDeduplicationId ? { MessageDeduplicationId: m.Attributes.MessageDeduplicationId } : {}),
        ...(m.Attributes?.SequenceNumber ? { SequenceNumber: m.Attributes.SequenceNumber } : {}),
      },
      messageAttributes: Object.fromEntries(
        Object.entries(m.MessageAttributes ?? {}).map(([k, v]) => [
          k,
          { dataType: v.DataType ?? "String", ...(v.StringValue === undefined ? {} : { stringValue: v.StringValue }) },
        ]),
      ),
      md5OfBody: m.MD5OfBody ?? "",
      eventSource: "aws:sqs",
      eventSourceARN: `arn:aws:sqs:us-east-1:000000000000:${queueName}`,
      awsRegion: "us-east-1",
    })),
  };
}

/** What the bridge would publish for this object, built from the object as the API returns it. */
export function keyEventOf(
  op: Operator<unknown>,
  obj: { metadata?: { name?: string; namespace?: string; uid?: string; resourceVersion?: string; generation?: number } },
  type: KeyEvent["type"] = "MODIFIED",
): KeyEvent {
  const m = obj.metadata ?? {};
  return {
    v: 1,
    cluster: CLUSTER,
    group: op.resource.group,
    version: op.resource.version,
    plural: op.resource.plural,
    kind: op.resource.kind,
    ...(m.namespace ? { namespace: m.namespace } : {}),
    name: m.name ?? "",
    uid: m.uid ?? "",
    resourceVersion: m.resourceVersion ?? "",
    generation: m.generation ?? 0,
    type,
    reason: "watch",
    observedAt: new Date().toISOString(),
  };
}

/**
 * The event the bridge would publish for an object now: the object (without managedFields) and
 * the keys of its children — labelled with its uid, controlled by it, the applied hash only
 * after the function's own apply — read from the cluster as the bridge's index holds them.
 */
export async function announcedEvent(env: Env, op: Operator<unknown>, obj: Cr): Promise<KeyEvent> {
  const { managedFields: _dropped, ...metadata } = (obj.metadata ?? {}) as Record<string, unknown>;
  const uid = obj.metadata?.uid ?? "";
  const children: ChildKey[] = [];
  for (const owned of op.owns) {
    const items = await env.api.list(
      {
        group: owned.group,
        version: owned.version,
        plural: owned.plural,
        ...(obj.metadata?.namespace && owned.namespaced ? { namespace: obj.metadata.namespace } : {}),
      },
      `${PARENT_UID_LABEL}=${uid}`,
    );
    for (const c of items) {
      if (!((c.metadata.ownerReferences as Array<{ uid?: string; controller?: boolean }> | undefined) ?? []).some((r) => r.controller && r.uid === uid))
        continue;
      const hash = appliedHashOf(c, op.fieldManager);
      children.push({
        apiVersion: apiVersionOf(owned.group, owned.version),
        kind: owned.kind,
        ...(c.metadata.namespace ? { namespace: c.metadata.namespace } : {}),
        name: c.metadata.name,
        uid: c.metadata.uid ?? "",
        resourceVersion: c.metadata.resourceVersion ?? "",
        ...(hash ? { appliedHash: hash } : {}),
      });
    }
  }
  return { ...keyEventOf(op, obj), v: 2, object: { ...obj, metadata: metadata as never }, children };
}

/** Publishes like the bridge: signed with the test key, FIFO group per object, deduplication per object version. */
export async function publish(env: Env, event: KeyEvent, cause = ""): Promise<void> {
  await env.sqs.send(
    new SendMessageCommand({
      QueueUrl: env.cluster.sqs.queues.fifo,
      MessageBody: encodeKeyEvent(signedForTest(event)),
      MessageGroupId: messageGroupId(event),
      MessageDeduplicationId: deduplicationId(event, cause),
    }),
  );
}

export async function purgeAll(env: Env): Promise<void> {
  const { fifo, fifoDlq } = env.cluster.sqs.queues;
  for (const url of [fifo, fifoDlq]) await env.sqs.send(new PurgeQueueCommand({ QueueUrl: url }));
}

export async function receiveAll(env: Env, queueUrl: string, visibilityTimeout = 1): Promise<Message[]> {
  const out = await env.sqs.send(
    new ReceiveMessageCommand({
      QueueUrl: queueUrl,
      MaxNumberOfMessages: 10,
      WaitTimeSeconds: 1,
      VisibilityTimeout: visibilityTimeout,
      MessageSystemAttributeNames: ["All"],
      MessageAttributeNames: ["All"],
    }),
  );
  return out.Messages ?? [];
}

export async function waitFor(what: string, check: () => Promise<boolean> | boolean, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline) throw new Error(`timed out waiting for: ${what}`);
    await new Promise((r) => setTimeout(r, 150));
  }
}

export type Cr = {
  metadata?: {
    name?: string;
    namespace?: string;
    uid?: string;
    resourceVersion?: string;
    generation?: number;
    finalizers?: string[];
    deletionTimestamp?: string;
  };
  spec?: Record<string, unknown>;
  status?: { observedGeneration?: number; conditions?: Array<{ type: string; status: string; reason: string; message: string }> } & Record<string, unknown>;
};

export function crApi(env: Env, op: Operator<unknown>, namespace = env.cluster.namespace) {
  const base = { group: op.resource.group, version: op.resource.version, plural: op.resource.plural, namespace };
  return {
    create: async (name: string, spec: Record<string, unknown>): Promise<Cr> =>
      (await env.custom.createNamespacedCustomObject({ ...base, body: { apiVersion: op.apiVersion, kind: op.resource.kind, metadata: { name }, spec } })) as Cr,
    get: async (name: string): Promise<Cr | undefined> => {
      try {
        return (await env.custom.getNamespacedCustomObject({ ...base, name })) as Cr;
      } catch (e) {
        if ((e as { code?: number }).code === 404) return undefined;
        throw e;
      }
    },
    replaceSpec: async (name: string, spec: Record<string, unknown>): Promise<Cr> => {
      const current = (await env.custom.getNamespacedCustomObject({ ...base, name })) as unknown as Cr & Record<string, unknown>;
      return (await env.custom.replaceNamespacedCustomObject({ ...base, name, body: { ...current, spec } })) as Cr;
    },
    /** A JSON patch without a resourceVersion: never conflicts with the operator's status writes. */
    patchSpec: async (name: string, spec: Record<string, unknown>): Promise<Cr> =>
      (await env.custom.patchNamespacedCustomObject({ ...base, name, body: [{ op: "replace", path: "/spec", value: spec }] })) as Cr,
    delete: async (name: string): Promise<void> => {
      await env.custom.deleteNamespacedCustomObject({ ...base, name });
    },
  };
}

export const ready = (cr: Cr | undefined) => cr?.status?.conditions?.find((c) => c.type === "Ready");
