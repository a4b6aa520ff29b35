// One change, one trace (issue 51), on both delivery paths: a real API server and etcd, the real
// bridge, and the functions, each with its own OpenTelemetry SDK configured as deployed (by
// OTEL_EXPORTER_OTLP_ENDPOINT) and exporting to a real OTLP/HTTP receiver on loopback
// (support/otlp-receiver.ts). The Lambda path: the bridge → ElasticMQ's FIFO queue → the local
// poller → the function; the Cloud Run path: the bridge → the Pub/Sub emulator (ordering key per
// object) → the push deliverer → functions-framework → the function.
//
// One spec change gives one trace holding the bridge's spans (change, hold, send), the time in
// the queue, the function's handling, its steps and every API request; in causal order; the three
// stages' durations add up to the change's latency as a client sees it (within 10 %); a 409 shows
// as a failed request and a second attempt in the same trace; a requeue, and a retry after a
// failure, are traces of their own, linked to the change that scheduled them. The API server runs
// with its tracing configured (servers of the file's own) and its spans for the function's
// requests reach the same receiver over OTLP/gRPC.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { Watch } from "@kubernetes/client-node";
import { z } from "zod";
import { startBridge, type RunningBridge } from "../bridge/bridge.ts";
import { loadBridgeConfig } from "../bridge/config.ts";
import { pubSubPublisher, pubSubTransport } from "../bridge/pubsub-transport.ts";
import { startLocalCloudRun, type LocalCloudRun } from "../cli/local/cloud-run.ts";
import { startTracing, tracingSettings, type Tracing } from "../clients/tracing.ts";
import { TemporaryError } from "../core/errors.ts";
import { defineOperator, type Operator } from "../core/operator.ts";
import { operatorName } from "../deploy/rbac.ts";
import { startLocalPubSub, type LocalPubSub } from "../emulator/pubsub.ts";
import type { Poller } from "../functions/adapters/poller.ts";
import type { KubeApi } from "../functions/runtime/kube-api.ts";
import { createKubeApi } from "../functions/runtime/kube-api-http.ts";
import { TEST_EVENT_KEY } from "./support/event-key.ts";
import { eventually } from "./support/eventually.ts";
import { CLUSTER, crApi, pollerFor, ready, runtimeFor, startEnv, startTestBridge, waitFor, type Cr, type Env } from "./support/functions-environment.ts";
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from "./support/otlp-receiver.ts";

const GROUP = "traced.crdfn.dev";
const spec = z.object({
  message: z.string(),
  /** Asks to be reconciled again this many seconds later (requeueAfterSeconds). */
  requeue: z.number().int().positive().optional(),
  /** Someone else writes the object's status while this generation's reconcile runs: its status write meets a 409. */
  conflict: z.boolean().optional(),
  /** Fails (TemporaryError, retried 1 s later) until this time. */
  failUntil: z.iso.datetime().optional(),
});
const traced = (plural: string, kind: string) =>
  defineOperator({
    resource: { group: GROUP, version: "v1", plural, kind },
    spec,
    owns: [{ group: "", version: "v1", kind: "ConfigMap" }],
    reconcile: (t, ctx) => {
      if (t.spec.failUntil && ctx.now < new Date(t.spec.failUntil)) throw new TemporaryError("not yet", 1, "NotYet");
      return {
        children: [{ apiVersion: "v1", kind: "ConfigMap", metadata: { name: `${t.metadata.name}-out` }, data: { message: t.spec.message } }],
        status: { said: t.spec.message },
        ...(t.spec.requeue ? { requeueAfterSeconds: t.spec.requeue } : {}),
      };
    },
  }) as Operator<unknown>;
const lambdaOp = traced("lambdatraces", "LambdaTrace");
const cloudRunOp = traced("cloudruntraces", "CloudRunTrace");

/** Changes measured for the latency rule: it holds for their median. */
const MEASURED_CHANGES = 7;
/** Clock disagreement allowed between two spans' ends: the queue stamps whole milliseconds, and processes round differently. */
const SKEW_MS = 2;
const ms = (ns: bigint): number => Number(ns) / 1e6;
const durationMs = (s: ReceivedSpan): number => ms(s.endNs - s.startNs);

/**
 * The function's API, as deployed (its identity, each request a span), writing the object's
 * status as someone else once between a reconcile's read and its status write whenever the spec
 * asks for a conflict: that write then meets 409 Conflict, and the runtime reads again and retries.
 */
function conflicting(api: KubeApi, poke: (name: string) => Promise<void>): KubeApi {
  const poked = new Set<string>();
  const wrap = (inner: KubeApi): KubeApi => ({
    ...inner,
    replaceStatus: async (ref, object, fieldManager) => {
      const key = `${ref.name}@${object.metadata.generation}`;
      if ((object.spec as { conflict?: boolean } | undefined)?.conflict && !poked.has(key)) {
        poked.add(key);
        await poke(ref.name!);
      }
      return inner.replaceStatus(ref, object, fieldManager);
    },
    ...(inner.under ? { under: (traceOf: Parameters<NonNullable<KubeApi["under"]>>[0]) => wrap(inner.under!(traceOf)) } : {}),
  });
  return wrap(api);
}

/** Both halves' tracing, as their entry files build it from the environment. */
async function tracingFor(receiver: OtlpReceiver): Promise<{ bridge: Tracing; fn: Tracing }> {
  const env = { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint };
  return { bridge: await startTracing(tracingSettings(env, "crdfn-bridge")), fn: await startTracing(tracingSettings(env, "crdfn-function")) };
}

interface Measured {
  /** From the response to our spec write to the watch delivering Ready for that generation (ms). */
  latencyMs: number;
  resourceVersion: string;
  generation: number;
}

/**
 * Changes an object's spec and measures the change as its writer sees it: from the response to
 * the write (the change is committed; the bridge's watch hears of it from here on) to the watch
 * delivering the object with Ready=True for the new generation (the function's status write
 * committed, as any client of the API server learns it). A watch opened before the write, at the
 * object's resourceVersion, so no poll interval is in the figure.
 */
async function changeAndWait(env: Env, op: Operator<unknown>, name: string, next: Record<string, unknown>): Promise<Measured> {
  const current = (await crApi(env, op).get(name))!;
  const path = `/apis/${op.resource.group}/${op.resource.version}/namespaces/${env.cluster.namespace}/${op.resource.plural}`;
  const seen: Array<{ at: number; object: Cr }> = [];
  const request = await new Watch(env.cluster.kubeConfig).watch(
    path,
    { resourceVersion: current.metadata!.resourceVersion!, fieldSelector: `metadata.name=${name}` },
    (_type: string, object: Cr) => void seen.push({ at: performance.now(), object }),
    () => undefined,
  );
  try {
    const response = await crApi(env, op).patchSpec(name, next);
    const writtenAt = performance.now();
    const generation = response.metadata!.generation!;
    const readyFor = (o: Cr) => {
      const c = ready(o) as { status: string; observedGeneration?: number } | undefined;
      return c?.status === "True" && c.observedGeneration === generation;
    };
    let readyAt = 0;
    await waitFor(
      `${name} Ready for generation ${generation}, by its watch`,
      () => {
        readyAt = seen.find((e) => readyFor(e.object))?.at ?? 0;
        return readyAt > 0;
      },
      60_000,
    );
    return { latencyMs: readyAt - writtenAt, resourceVersion: response.metadata!.resourceVersion!, generation };
  } finally {
    request.abort();
  }
}

/** The trace whose "bridge change" announced this version of the object, once its function's spans have arrived too. */
async function traceOf(
  receiver: OtlpReceiver,
  tracings: { bridge: Tracing; fn: Tracing },
  objectKey: string,
  resourceVersion: string,
): Promise<ReceivedSpan[]> {
  let spans: ReceivedSpan[] = [];
  try {
    await waitFor(
      `the trace of ${objectKey}@${resourceVersion}`,
      async () => {
        await Promise.all([tracings.bridge.flush(2000), tracings.fn.flush(2000)]);
        const root = receiver.spans.find(
          (s) => s.name === "bridge change" && s.attributes["crdfn.object"] === objectKey && s.attributes["k8s.object.resource_version"] === resourceVersion,
        );
        spans = root ? receiver.spans.filter((s) => s.traceId === root.traceId) : [];
        return spans.some((s) => s.name === "function handle" && s.attributes["crdfn.outcome"] !== undefined);
      },
      30_000,
    );
  } catch (e) {
    const about = receiver.spans.filter((s) => String(s.attributes["crdfn.object"] ?? "").endsWith(objectKey));
    const seen = about.map((s) => `${s.service} ${s.name} ${s.traceId.slice(0, 8)} rv=${s.attributes["k8s.object.resource_version"]}`);
    throw new Error(
      `${(e as Error).message}; ${receiver.spans.length} spans received, of this object: ${seen.join("; ")}; in this trace: ${spans.map((s) => s.name).join(", ")}`,
    );
  }
  return spans;
}

const one = (spans: ReceivedSpan[], name: string): ReceivedSpan => {
  const found = spans.filter((s) => s.name === name);
  assert.equal(found.length, 1, `one "${name}" span, of: ${spans.map((s) => s.name).join(", ")}`);
  return found[0]!;
};

/** A waterfall for the test's output: start offset, duration, name. */
function waterfall(spans: ReceivedSpan[]): string {
  const t0 = spans.reduce((m, s) => (s.startNs < m ? s.startNs : m), spans[0]!.startNs);
  return [...spans]
    .sort((a, b) => (a.startNs < b.startNs ? -1 : a.startNs > b.startNs ? 1 : 0))
    .map(
      (s) =>
        `#   ${ms(s.startNs - t0)
          .toFixed(1)
          .padStart(7)} ms +${durationMs(s).toFixed(1).padStart(6)} ms  ${s.service.padEnd(15)} ${s.name}`,
    )
    .join("\n");
}

/**
 * What holds for the trace of any change: one trace, bridge → queue → function, in causal order.
 * Within a process a child span lies inside its parent. The function's handling is a child of
 * the bridge's change by context only (the event carries it): it follows the change, it does not
 * lie inside it, so across the queue the order is checked instead: the send, then the time in the
 * queue (from the queue's own timestamp), then the handling, each starting no earlier than the last.
 */
function assertCausal(spans: ReceivedSpan[]): { change: ReceivedSpan; queue: ReceivedSpan; handle: ReceivedSpan } {
  const change = one(spans, "bridge change");
  const send = spans.filter((s) => s.name === "bridge send").at(-1)!;
  one(spans, "bridge hold");
  const queue = one(spans, "queue wait");
  const handle = one(spans, "function handle");
  assert.equal(change.parentSpanId, "", "the change is the trace's root");
  assert.equal(handle.parentSpanId, change.spanId, "the function continues the context its event carries");
  assert.equal(queue.parentSpanId, handle.spanId);
  const byId = new Map(spans.map((s) => [s.spanId, s]));
  for (const s of spans) {
    const parent = byId.get(s.parentSpanId);
    if (parent === undefined || parent.service !== s.service || s === queue) continue;
    assert.ok(s.startNs >= parent.startNs, `${s.name} starts within ${parent.name}`);
    assert.ok(ms(s.endNs - parent.endNs) <= SKEW_MS, `${s.name} ends within ${parent.name} (${ms(s.endNs - parent.endNs).toFixed(2)} ms after)`);
  }
  assert.ok(ms(send.startNs - queue.startNs) <= SKEW_MS + 1, "the queue took it once the bridge sent it");
  assert.ok(queue.startNs >= change.startNs, "the time in the queue follows the change");
  assert.ok(ms(queue.endNs - handle.startNs) <= SKEW_MS, "the function handles it once it leaves the queue");
  for (const s of spans.filter((x) => x.service === "crdfn-function" && x !== queue))
    assert.ok(s.startNs >= handle.startNs && ms(s.endNs - handle.endNs) <= SKEW_MS, `${s.name} lies within the handling`);
  return { change, queue, handle };
}

/**
 * The stages of one change, end to end and without overlap: the bridge's part (from its watch
 * event until the queue has the message, by the queue's own timestamp: the send's answer still
 * on its way back lies in the queue's time), the time in the queue, the function's handling. The
 * spans' plain durations are printed beside them (the bridge's change ends when the send's
 * answer is read, some milliseconds into the queue's time).
 */
function stagesOf(spans: ReceivedSpan[]): { stagesMs: number; plainMs: number; line: string } {
  const { change, queue, handle } = assertCausal(spans);
  const bridge = ms((queue.startNs < change.endNs ? queue.startNs : change.endNs) - change.startNs);
  const stagesMs = bridge + durationMs(queue) + durationMs(handle);
  const plainMs = durationMs(change) + durationMs(queue) + durationMs(handle);
  const line = `bridge ${bridge.toFixed(1)} + queue ${durationMs(queue).toFixed(1)} + function ${durationMs(handle).toFixed(1)} = ${stagesMs.toFixed(1)} ms (the spans' plain durations: ${durationMs(change).toFixed(1)} + ${durationMs(queue).toFixed(1)} + ${durationMs(handle).toFixed(1)} = ${plainMs.toFixed(1)} ms)`;
  return { stagesMs, plainMs, line };
}

/**
 * kube-apiserver's own spans (KEP-647) for the function's requests, each sent with its request
 * span's traceparent. The API server continues an incoming context only for privileged callers
 * (system:masters); for anyone else, the function's ServiceAccount among them, it starts a trace
 * of its own that links to the caller's span (k8s.io/apiserver's WithTracing, the public-endpoint
 * rule), so either is accepted: a child of the request's span, or a root linked to it.
 */
async function assertApiServerSpans(receiver: OtlpReceiver, requests: ReceivedSpan[]): Promise<void> {
  const ids = new Set(requests.map((r) => r.spanId));
  const joined = (s: ReceivedSpan) => ids.has(s.parentSpanId) || (s.links ?? []).some((l) => ids.has(l.spanId));
  // Its exporter batches for up to 5 s.
  const found = await eventually(
    () => {
      const mine = receiver.spans.filter((s) => s.service === "apiserver" && joined(s));
      assert.ok(mine.length >= requests.length, `${mine.length} of ${requests.length} requests have the API server's span`);
      return mine;
    },
    { timeoutMs: 30_000 },
  );
  const parented = found.filter((s) => ids.has(s.parentSpanId)).length;
  console.log(
    `# the API server's spans for ${requests.length} requests: ${parented} continue the request's trace, ${found.length - parented} link to it (${[...new Set(found.map((s) => s.name))].join(", ")})`,
  );
}

/** The object's key as the bridge's spans name it (its publisher's key; the function's spans put the cluster first). */
const keyOf = (env: Env, op: Operator<unknown>, name: string) => `${op.resource.group}/${op.resource.plural}/${env.cluster.namespace}/${name}`;

function pathChecks(what: string, op: Operator<unknown>, get: () => { env: Env; receiver: OtlpReceiver; tracings: { bridge: Tracing; fn: Tracing } }): void {
  const crs = () => crApi(get().env, op);

  it(`${what}: one spec change is one trace, bridge → queue → function and each API request, in causal order, adding up to its latency`, async () => {
    const { env, receiver, tracings } = get();
    const name = `${op.resource.plural}-one`;
    await crs().create(name, { message: "first" });
    await waitFor(`${name} Ready`, async () => ready(await crs().get(name))?.status === "True", 60_000);
    // Warm: the first change paid for connections and code loading; those after it are measured.
    await changeAndWait(env, op, name, { message: "warm" });
    const ratios: number[] = [];
    let requests: ReceivedSpan[] = [];
    for (let i = 0; i < MEASURED_CHANGES; i++) {
      const measured = await changeAndWait(env, op, name, { message: `change ${i}` });
      const spans = await traceOf(receiver, tracings, keyOf(env, op, name), measured.resourceVersion);
      const handle = one(spans, "function handle");
      assert.equal(handle.attributes["crdfn.outcome"], "success");
      assert.equal(handle.attributes["crdfn.cause"], "watch");
      const names = new Set(spans.map((s) => s.name));
      for (const n of ["bridge change", "bridge hold", "bridge send", "queue wait", "function handle", "reconcile", "function write"])
        assert.ok(names.has(n), `${n} in ${[...names].join(", ")}`);
      requests = spans.filter((s) => s.name.startsWith("kube "));
      assert.ok(
        requests.some((s) => s.name === "kube PATCH configmaps"),
        `the child's apply: ${requests.map((s) => s.name).join(", ")}`,
      );
      assert.ok(
        requests.some((s) => s.name === `kube PUT ${op.resource.plural}` && s.attributes["k8s.subresource"] === "status"),
        "the status write",
      );
      const { stagesMs, line } = stagesOf(spans);
      ratios.push(stagesMs / measured.latencyMs);
      console.log(`# ${what}, change ${i}: change→Ready ${measured.latencyMs.toFixed(1)} ms; ${line}${i === 0 ? `\n${waterfall(spans)}` : ""}`);
    }
    // The median change: one whose process was descheduled at the wrong moment (the write's
    // answer read late, say) measures a latency that is not the change's.
    const median = [...ratios].sort((a, b) => a - b)[Math.floor(ratios.length / 2)]!;
    console.log(
      `# ${what}: stages / change→Ready, median of ${ratios.length}: ${(median * 100).toFixed(1)} % (each: ${ratios.map((r) => `${(r * 100).toFixed(0)} %`).join(", ")})`,
    );
    assert.ok(Math.abs(median - 1) <= 0.1, `${what}: the stages add up to ${(median * 100).toFixed(1)} % of the change's latency (median)`);
    await assertApiServerSpans(receiver, requests);
  });

  it(`${what}: a 409 on the status write shows in the change's trace as a failed request and a second attempt`, async () => {
    const { env, receiver, tracings } = get();
    const name = `${op.resource.plural}-conflict`;
    await crs().create(name, { message: "first" });
    await waitFor(`${name} Ready`, async () => ready(await crs().get(name))?.status === "True", 60_000);
    const measured = await changeAndWait(env, op, name, { message: "second", conflict: true });
    const spans = await traceOf(receiver, tracings, keyOf(env, op, name), measured.resourceVersion);
    const writes = spans.filter((s) => s.name === `kube PUT ${op.resource.plural}`);
    assert.deepEqual(
      writes.map((s) => [s.attributes["crdfn.attempt"], s.attributes["http.response.status_code"], s.statusCode]),
      [
        [1, 409, 2],
        [2, 200, 0],
      ],
      "the status write conflicted once, then went through",
    );
    assert.ok(
      spans.some((s) => s.name === "function read" && s.attributes["crdfn.attempt"] === 2),
      "the second attempt read the object again",
    );
    assert.equal(one(spans, "function handle").attributes["crdfn.outcome"], "success");
    console.log(`# ${what}, with a 409: change→Ready ${measured.latencyMs.toFixed(1)} ms; ${stagesOf(spans).line}\n${waterfall(spans)}`);
  });

  /** The trace of the next change of the object whose bridge change links to `from`'s root, with its function's handling. */
  const linkedTo = async (receiver: OtlpReceiver, tracings: { bridge: Tracing; fn: Tracing }, from: ReceivedSpan): Promise<ReceivedSpan[]> => {
    let found: ReceivedSpan[] = [];
    await waitFor(
      "the scheduled change's trace",
      async () => {
        await Promise.all([tracings.bridge.flush(2000), tracings.fn.flush(2000)]);
        const root = receiver.spans.find((s) => s.name === "bridge change" && (s.links ?? []).some((l) => l.traceId === from.traceId));
        found = root ? receiver.spans.filter((s) => s.traceId === root.traceId) : [];
        return found.some((s) => s.name === "function handle" && s.attributes["crdfn.outcome"] !== undefined);
      },
      30_000,
    );
    return found;
  };

  /**
   * What fell due is a trace of its own, a root linked to the change that scheduled it — to the
   * handling there that decided it (`by`, which status.nextReconcile.traceparent names) — and
   * both halves name its cause.
   */
  const assertScheduled = (scheduled: ReceivedSpan[], from: ReceivedSpan, by: ReceivedSpan, cause: "requeue" | "retry"): void => {
    const root = one(scheduled, "bridge change");
    assert.notEqual(root.traceId, from.traceId, "a trace of its own");
    assert.equal(root.parentSpanId, "");
    assert.equal(root.attributes["crdfn.cause"], cause);
    assert.deepEqual(
      (root.links ?? []).map((l) => [l.traceId, l.spanId, l.attributes["crdfn.link"]]),
      [[from.traceId, by.spanId, cause]],
    );
    assert.equal(one(scheduled, "function handle").attributes["crdfn.cause"], cause);
    assertCausal(scheduled);
  };

  it(`${what}: a requeue that falls due is a trace of its own, linked to the change that scheduled it`, async () => {
    const { env, receiver, tracings } = get();
    const name = `${op.resource.plural}-requeue`;
    await crs().create(name, { message: "first" });
    await waitFor(`${name} Ready`, async () => ready(await crs().get(name))?.status === "True", 60_000);
    const measured = await changeAndWait(env, op, name, { message: "again", requeue: 2 });
    const scheduling = await traceOf(receiver, tracings, keyOf(env, op, name), measured.resourceVersion);
    const change = one(scheduling, "bridge change");
    const requeued = await linkedTo(receiver, tracings, change);
    // No more ticks.
    await crs().patchSpec(name, { message: "again" });
    assertScheduled(requeued, change, one(scheduling, "function handle"), "requeue");
  });

  it(`${what}: a retry after a failure is a trace of its own, linked to the failed change's`, async () => {
    const { env, receiver, tracings } = get();
    const name = `${op.resource.plural}-retry`;
    await crs().create(name, { message: "first" });
    await waitFor(`${name} Ready`, async () => ready(await crs().get(name))?.status === "True", 60_000);
    const response = await crs().patchSpec(name, { message: "later", failUntil: new Date(Date.now() + 1500).toISOString() });
    const failed = await traceOf(receiver, tracings, keyOf(env, op, name), response.metadata!.resourceVersion!);
    assert.equal(one(failed, "function handle").attributes["crdfn.outcome"], "retry-later");
    const retried = await linkedTo(receiver, tracings, one(failed, "bridge change"));
    assertScheduled(retried, one(failed, "bridge change"), one(failed, "function handle"), "retry");
    await waitFor(`${name} Ready once it no longer fails`, async () => ready(await crs().get(name))?.status === "True", 30_000);
  });
}

describe("one change, one trace", { timeout: 600_000 }, () => {
  let env: Env;
  let receiver: OtlpReceiver;
  let tracings: { bridge: Tracing; fn: Tracing };

  before(async () => {
    receiver = await startOtlpReceiver({ grpc: true });
    tracings = await tracingFor(receiver);
    // Servers of its own: its API server exports its spans to the receiver (OTLP/gRPC), which a shared one does not.
    env = await startEnv([lambdaOp, cloudRunOp], { file: import.meta.filename, own: { tracingEndpoint: receiver.grpcEndpoint! } });
  });
  after(async () => {
    await tracings?.bridge.shutdown(1000);
    await tracings?.fn.shutdown(1000);
    await receiver?.close();
    await env?.cluster.stop();
  });

  /** The function's runtime as deployed, traced, its API conflicting on request. */
  const tracedRuntime = (op: Operator<unknown>) => {
    const connection = env.identities ? env.identities.functionConnection(op) : env.cluster.kubeConfig;
    const poke = async (name: string) => {
      await env.custom.patchNamespacedCustomObjectStatus({
        group: op.resource.group,
        version: op.resource.version,
        plural: op.resource.plural,
        namespace: env.cluster.namespace,
        name,
        body: [{ op: "add", path: "/status/poked", value: new Date().toISOString() }],
      });
    };
    const api = conflicting(createKubeApi({ connection }, { tracer: tracings.fn.tracer }), poke);
    return runtimeFor(env, op, { api, tracer: tracings.fn.tracer });
  };

  describe("Lambda path: bridge → SQS FIFO → poller → function", () => {
    let bridge: RunningBridge;
    let poller: Poller;
    before(async () => {
      bridge = await startTestBridge(env, `${GROUP}/v1/${lambdaOp.resource.plural}>v1/configmaps`, { tracer: tracings.bridge.tracer });
      poller = pollerFor(env, tracedRuntime(lambdaOp));
    });
    after(async () => {
      await poller?.stop();
      await bridge?.stop(1000);
    });
    pathChecks("Lambda path", lambdaOp, () => ({ env, receiver, tracings }));
  });

  describe("Cloud Run path: bridge → Pub/Sub → push → functions-framework → function", () => {
    let pubsub: LocalPubSub;
    let cloudRun: LocalCloudRun;
    let bridge: RunningBridge;
    before(async () => {
      pubsub = await startLocalPubSub({ log: () => {} });
      const runtime = tracedRuntime(cloudRunOp);
      cloudRun = await startLocalCloudRun({ pubsub, operators: [cloudRunOp], runtimeOf: () => runtime, logger: env.logger });
      const config = loadBridgeConfig({
        CRDFN_CLUSTER: CLUSTER,
        CRDFN_PUBSUB_TOPIC: cloudRun.names.get(operatorName(cloudRunOp))!.topic,
        PUBSUB_EMULATOR_HOST: pubsub.host,
        CRDFN_RESOURCES: `${GROUP}/v1/${cloudRunOp.resource.plural}>v1/configmaps`,
        ...(env.cluster.shared ? { CRDFN_NAMESPACES: env.cluster.namespaces.join(",") } : {}),
        CRDFN_RESYNC_SECONDS: "0",
        CRDFN_HTTP_PORT: "0",
      });
      bridge = startBridge(config, {
        eventKey: TEST_EVENT_KEY,
        kubeConfig: env.cluster.kubeConfig,
        transport: pubSubTransport(pubSubPublisher({ apiEndpoint: pubsub.host })),
        logger: env.logger.child({ component: "bridge" }),
        tracer: tracings.bridge.tracer,
      });
      await bridge.ready;
    });
    after(async () => {
      await bridge?.stop(1000);
      await cloudRun?.stop();
      await pubsub?.stop();
    });
    pathChecks("Cloud Run path", cloudRunOp, () => ({ env, receiver, tracings }));
  });
});
