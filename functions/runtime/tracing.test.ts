// The function continues a change's trace only from an event whose MAC verifies; under its
// "function handle" span, its time in the queue, each step, and each API request of a step.
import assert from "node:assert/strict";
import { createServer, type IncomingHttpHeaders } from "node:http";
import type { AddressInfo } from "node:net";
import { describe, it } from "node:test";
import { KubeConfig } from "@kubernetes/client-node";
import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider, type ReadableSpan } from "@opentelemetry/sdk-trace";
import { pino } from "pino";
import { z } from "zod";
import { defineOperator, type Operator } from "../../core/operator.ts";
import { createFakeKube } from "../testing/index.ts";
import { createKubeApi } from "./kube-api-http.ts";
import { createRuntime, handleMessage } from "./runtime.ts";
import { lambdaHandler } from "../adapters/lambda.ts";
import { httpHandler } from "../adapters/http.ts";
import type { Context, SQSEvent } from "aws-lambda";
import { signedForTest, testRuntimeKeys } from "../../test/support/event-key.ts";

const greeter = defineOperator<{ message: string }>({
  resource: { group: "example.com", version: "v1", plural: "greetings", kind: "Greeting" },
  spec: z.object({ message: z.string() }),
  reconcile: () => ({ status: { phase: "Ready" } }),
});
const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

const eventOf = (uid: string, resourceVersion: string) => ({
  v: 1 as const,
  cluster: "t",
  group: "example.com",
  version: "v1",
  plural: "greetings",
  kind: "Greeting",
  namespace: "default",
  name: "hello",
  uid,
  resourceVersion,
  generation: 1,
  type: "ADDED" as const,
  reason: "watch",
  observedAt: new Date().toISOString(),
  traceparent,
});

const startMs = (s: ReadableSpan): number => s.startTime[0] * 1000 + s.startTime[1] / 1e6;
const endMs = (s: ReadableSpan): number => s.endTime[0] * 1000 + s.endTime[1] / 1e6;

const greetingRef = { group: "example.com", version: "v1", plural: "greetings", namespace: "default", name: "hello" };

/** One signed event of a Greeting handled by a traced runtime over a fake API; its outcome, spans and the API after. */
async function handled(forge: boolean, operator: Operator<{ message: string }> = greeter) {
  const kube = createFakeKube();
  const created = kube.put(greetingRef, { apiVersion: "example.com/v1", kind: "Greeting", metadata: { name: "hello" }, spec: { message: "hi" } });
  const exporter = new InMemorySpanExporter();
  const tracer = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter })] }).getTracer("test");
  const runtime = createRuntime(operator, { api: kube, logger: pino({ level: "silent" }), clock: () => new Date(), tracer, ...testRuntimeKeys(operator, "t") });
  const signed = signedForTest(eventOf(created.metadata.uid!, created.metadata.resourceVersion!));
  const body = forge ? { ...signed, traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-1111111111111111-01" } : signed;
  const sentAt = Date.now() - 250;
  const outcome = await handleMessage(runtime, { id: "m-1", body: JSON.stringify(body), receiveCount: 1, sentAt, system: "aws_sqs" });
  return { outcome, spans: exporter.getFinishedSpans(), sentAt, kube };
}

/**
 * The runtime over the real HTTP client against a loopback API server holding one Greeting, whose
 * first status write answers 409 Conflict: the headers of every request it got, and the spans.
 */
async function handledOverHttp() {
  const object = {
    apiVersion: "example.com/v1",
    kind: "Greeting",
    metadata: { name: "hello", namespace: "default", uid: "u-1", resourceVersion: "7", generation: 1 },
    spec: { message: "hi" },
  };
  const requests: Array<{ method: string; path: string; headers: IncomingHttpHeaders }> = [];
  let puts = 0;
  const server = createServer((req, res) => {
    requests.push({ method: req.method ?? "", path: new URL(req.url ?? "/", "http://x").pathname, headers: req.headers });
    req.resume();
    const json = (status: number, body: unknown) => res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));
    if (req.method === "GET") return json(200, object);
    if (req.method === "PUT" && ++puts === 1) return json(409, { kind: "Status", code: 409, reason: "Conflict", message: "the object has been modified" });
    return json(200, { ...object, metadata: { ...object.metadata, resourceVersion: "8" } });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  try {
    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromClusterAndUser({ name: "c", server: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, skipTLSVerify: true }, { name: "u" });
    const exporter = new InMemorySpanExporter();
    const tracer = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter })] }).getTracer("test");
    const runtime = createRuntime(greeter, {
      api: createKubeApi({ connection: kubeConfig }, { tracer }),
      logger: pino({ level: "silent" }),
      clock: () => new Date(),
      tracer,
      ...testRuntimeKeys(greeter, "t"),
    });
    const body = JSON.stringify(signedForTest(eventOf("u-1", "7")));
    const outcome = await handleMessage(runtime, { id: "m-2", body, receiveCount: 2 });
    return { outcome, spans: exporter.getFinishedSpans(), requests };
  } finally {
    server.closeAllConnections();
    server.close();
  }
}

describe("function tracing", () => {
  it("a verified event's handling is a span of its change's trace, naming the object, cause, receive count and outcome", async () => {
    const { outcome, spans } = await handled(false);
    assert.equal(outcome.result, "success");
    const span = spans.find((s) => s.name === "function handle");
    assert.ok(span, spans.map((s) => s.name).join());
    assert.equal(span.spanContext().traceId, "4bf92f3577b34da6a3ce929d0e0e4736");
    assert.equal(span.parentSpanContext?.spanId, "00f067aa0ba902b7");
    assert.equal(span.attributes["crdfn.object"], "t/example.com/greetings/default/hello");
    assert.equal(span.attributes["crdfn.cause"], "watch");
    assert.equal(span.attributes["messaging.receive_count"], 1);
    assert.equal(span.attributes["crdfn.outcome"], "success");
  });

  it("under it: the time in the queue from the queue's own sent time, then each step in causal order", async () => {
    const { spans, sentAt } = await handled(false);
    const handle = spans.find((s) => s.name === "function handle")!;
    assert.equal(typeof handle.attributes["crdfn.verify_ms"], "number");
    const children = spans.filter((s) => s.parentSpanContext?.spanId === handle.spanContext().spanId).sort((a, b) => startMs(a) - startMs(b));
    assert.deepEqual(
      children.map((s) => s.name),
      ["queue wait", "function read", "function read", "reconcile", "function write"],
    );
    assert.deepEqual(
      children.filter((s) => s.name === "function read").map((s) => s.attributes["crdfn.read"]),
      ["object", "children and references"],
    );
    const wait = children[0]!;
    assert.equal(startMs(wait), sentAt);
    assert.equal(wait.attributes["messaging.system"], "aws_sqs");
    assert.ok(endMs(wait) - sentAt >= 250, `queue wait ${endMs(wait) - sentAt} ms`);
    // The SDK anchors each span's clock to Date.now() (whole milliseconds): 1 ms of slack.
    for (const [before, after] of children.slice(0, -1).map((s, i) => [s, children[i + 1]!] as const))
      assert.ok(endMs(before) <= startMs(after) + 1, `${before.name} ends before ${after.name} starts`);
    for (const s of children) assert.equal(s.spanContext().traceId, "4bf92f3577b34da6a3ce929d0e0e4736");
  });

  it("every API request is a span of the step that made it, a 409 and its retry each their own, its context sent as traceparent", async () => {
    const { outcome, spans, requests } = await handledOverHttp();
    assert.equal(outcome.result, "success", outcome.detail);
    const byId = new Map(spans.map((s) => [s.spanContext().spanId, s]));
    const kube = spans.filter((s) => s.name.startsWith("kube ")).sort((a, b) => startMs(a) - startMs(b));
    assert.deepEqual(
      kube.map((s) => [s.name, byId.get(s.parentSpanContext?.spanId ?? "")?.name, s.attributes["crdfn.attempt"], s.attributes["http.response.status_code"]]),
      [
        ["kube GET greetings", "function read", 1, 200],
        ["kube PUT greetings", "function write", 1, 409],
        ["kube GET greetings", "function read", 2, 200],
        ["kube PUT greetings", "function write", 2, 200],
      ],
    );
    const [, conflict, , written] = kube;
    assert.equal(conflict!.status.code, 2, "a 409 is an error");
    assert.equal(conflict!.attributes["http.request.method"], "PUT");
    assert.equal(conflict!.attributes["url.path"], "/apis/example.com/v1/namespaces/default/greetings/hello/status");
    assert.equal(written!.status.code, 0);
    // Each request carried its own span's context: the API server's spans join the trace there.
    assert.deepEqual(
      requests.map((r) => r.headers.traceparent),
      kube.map((s) => `00-${s.spanContext().traceId}-${s.spanContext().spanId}-01`),
    );
    const handle = spans.find((s) => s.name === "function handle")!;
    assert.equal(handle.attributes["messaging.receive_count"], 2);
    assert.equal(handle.attributes["crdfn.api_calls"], 4);
  });

  it("on Lambda: each record's settlement is a span of its change, and the spans are flushed before the invocation returns", async () => {
    const kube = createFakeKube();
    const ref = { group: "example.com", version: "v1", plural: "greetings", namespace: "default", name: "hello" };
    const created = kube.put(ref, { apiVersion: "example.com/v1", kind: "Greeting", metadata: { name: "hello" }, spec: { message: "hi" } });
    const exporter = new InMemorySpanExporter();
    const tracer = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter })] }).getTracer("test");
    const runtime = createRuntime(greeter, { api: kube, logger: pino({ level: "silent" }), clock: () => new Date(), tracer, ...testRuntimeKeys(greeter, "t") });
    const flushed: string[][] = [];
    const tracing = {
      tracer,
      enabled: true,
      flush: () => {
        flushed.push(exporter.getFinishedSpans().map((s) => s.name));
        return Promise.resolve();
      },
      shutdown: () => Promise.resolve(),
    };
    const handler = lambdaHandler(greeter, { runtime, tracing });
    const body = JSON.stringify(signedForTest(eventOf(created.metadata.uid!, created.metadata.resourceVersion!)));
    const sent = String(Date.now() - 40);
    const event = {
      Records: [{ messageId: "r1", body, receiptHandle: "h", attributes: { ApproximateReceiveCount: "1", SentTimestamp: sent, MessageGroupId: "g" } }],
    } as unknown as SQSEvent;
    assert.deepEqual((await handler(event, {} as Context)).batchItemFailures, []);
    assert.equal(flushed.length, 1, "flushed once, before the return");
    assert.deepEqual(flushed[0]!.filter((n) => n === "function handle" || n === "function settle" || n === "queue wait").sort(), [
      "function handle",
      "function settle",
      "queue wait",
    ]);
    const settle = exporter.getFinishedSpans().find((s) => s.name === "function settle")!;
    assert.equal(settle.attributes["crdfn.settlement"], "delete");
    assert.equal(settle.parentSpanContext?.spanId, "00f067aa0ba902b7", "beside its handling, under the span that sent it");
  });

  it("on Cloud Run: a push request's spans are flushed before it is answered, its queue wait from the message's publishTime", async () => {
    const kube = createFakeKube();
    const ref = { group: "example.com", version: "v1", plural: "greetings", namespace: "default", name: "hello" };
    const created = kube.put(ref, { apiVersion: "example.com/v1", kind: "Greeting", metadata: { name: "hello" }, spec: { message: "hi" } });
    const exporter = new InMemorySpanExporter();
    const tracer = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter })] }).getTracer("test");
    const runtime = createRuntime(greeter, { api: kube, logger: pino({ level: "silent" }), clock: () => new Date(), tracer, ...testRuntimeKeys(greeter, "t") });
    const order: string[] = [];
    const tracing = {
      tracer,
      enabled: true,
      flush: () => {
        order.push(`flush ${exporter.getFinishedSpans().filter((s) => s.name === "function handle").length}`);
        return Promise.resolve();
      },
      shutdown: () => Promise.resolve(),
    };
    const handler = httpHandler(greeter, { runtime, tracing, env: {} });
    const publishTime = new Date(Date.now() - 30).toISOString();
    const data = Buffer.from(JSON.stringify(signedForTest(eventOf(created.metadata.uid!, created.metadata.resourceVersion!)))).toString("base64");
    const push = { message: { data, messageId: "p1", publishTime, attributes: {} }, subscription: "projects/p/subscriptions/s", deliveryAttempt: 1 };
    const req = { rawBody: Buffer.from(JSON.stringify(push)), body: push, get: () => undefined };
    let status = 0;
    const res = {
      status(code: number) {
        status = code;
        order.push(`answer ${code}`);
        return this;
      },
      json() {
        return this;
      },
    };
    await handler(req as unknown as Parameters<typeof handler>[0], res as unknown as Parameters<typeof handler>[1]);
    assert.equal(status, 200);
    assert.deepEqual(order, ["flush 1", "answer 200"]);
    const wait = exporter.getFinishedSpans().find((s) => s.name === "queue wait")!;
    assert.equal(wait.attributes["messaging.system"], "gcp_pubsub");
    assert.equal(startMs(wait), Date.parse(publishTime));
  });

  it("a reconcile that throws: its span fails, and the failure's record is a 'function write' of its own", async () => {
    const failing = defineOperator<{ message: string }>({
      ...greeter,
      reconcile: () => {
        throw new Error("boom");
      },
    });
    const kube = createFakeKube();
    const ref = { group: "example.com", version: "v1", plural: "greetings", namespace: "default", name: "hello" };
    const created = kube.put(ref, { apiVersion: "example.com/v1", kind: "Greeting", metadata: { name: "hello" }, spec: { message: "hi" } });
    const exporter = new InMemorySpanExporter();
    const tracer = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter })] }).getTracer("test");
    const runtime = createRuntime(failing, { api: kube, logger: pino({ level: "silent" }), clock: () => new Date(), tracer, ...testRuntimeKeys(failing, "t") });
    const body = JSON.stringify(signedForTest(eventOf(created.metadata.uid!, created.metadata.resourceVersion!)));
    const outcome = await handleMessage(runtime, { id: "m-3", body, receiveCount: 1 });
    assert.equal(outcome.result, "retry-later");
    const spans = exporter.getFinishedSpans();
    const reconcile = spans.find((s) => s.name === "reconcile")!;
    assert.equal(reconcile.status.code, 2);
    assert.equal(reconcile.status.message, "boom");
    assert.deepEqual(
      spans.filter((s) => s.name === "function write").map((s) => s.attributes["crdfn.write"]),
      ["failure"],
    );
    assert.equal(spans.find((s) => s.name === "function handle")?.attributes["crdfn.outcome"], "retry-later");
  });

  it("what a traced handling schedules names its trace (status.nextReconcile.traceparent), and a timer says it is one", async () => {
    const scheduled = async (every: number | undefined, requeueAfterSeconds: number | undefined) => {
      const op = defineOperator<{ message: string }>({
        ...greeter,
        ...(every === undefined ? {} : { every }),
        reconcile: () => ({ status: { phase: "Ready" }, ...(requeueAfterSeconds === undefined ? {} : { requeueAfterSeconds }) }),
      });
      const { spans, kube } = await handled(false, op);
      const handle = spans.find((x) => x.name === "function handle")!;
      const next = ((await kube.get(greetingRef))?.status as { nextReconcile?: { traceparent?: string; timer?: boolean; reason: string } }).nextReconcile;
      return { next, handle: handle.spanContext() };
    };
    const timer = await scheduled(60, undefined);
    assert.equal(timer.next?.reason, "Requeue");
    assert.equal(timer.next?.timer, true);
    assert.equal(timer.next?.traceparent, `00-${timer.handle.traceId}-${timer.handle.spanId}-01`);
    const requeue = await scheduled(60, 5);
    assert.equal(requeue.next?.timer, undefined, "a requeueAfterSeconds sooner than the timer is a requeue");
    assert.match(requeue.next?.traceparent ?? "", /^00-4bf92f3577b34da6a3ce929d0e0e4736-/, "in the trace its event carried");
  });

  it("an event whose MAC does not verify joins no trace (dead-lettered, nothing traced)", async () => {
    const { outcome, spans } = await handled(true);
    assert.equal(outcome.result, "dead-letter");
    assert.deepEqual(spans, []);
  });
});
