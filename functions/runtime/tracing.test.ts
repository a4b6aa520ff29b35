// The function continues a change's trace only from an event whose MAC verifies.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider } from "@opentelemetry/sdk-trace";
import { pino } from "pino";
import { z } from "zod";
import { defineOperator } from "../../core/operator.ts";
import { createFakeKube } from "../testing/index.ts";
import { createRuntime, handleMessage } from "./runtime.ts";
import { signedForTest, testRuntimeKeys } from "../../test/support/event-key.ts";

const greeter = defineOperator<{ message: string }>({
  resource: { group: "example.com", version: "v1", plural: "greetings", kind: "Greeting" },
  spec: z.object({ message: z.string() }),
  reconcile: () => ({ status: { phase: "Ready" } }),
});
const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

async function handled(forge: boolean) {
  const kube = createFakeKube();
  const ref = { group: "example.com", version: "v1", plural: "greetings", namespace: "default", name: "hello" };
  const created = kube.put(ref, { apiVersion: "example.com/v1", kind: "Greeting", metadata: { name: "hello" }, spec: { message: "hi" } });
  const exporter = new InMemorySpanExporter();
  const tracer = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter })] }).getTracer("test");
  const runtime = createRuntime(greeter, { api: kube, logger: pino({ level: "silent" }), clock: () => new Date(), tracer, ...testRuntimeKeys(greeter, "t") });
  const signed = signedForTest({
    v: 1,
    cluster: "t",
    group: "example.com",
    version: "v1",
    plural: "greetings",
    kind: "Greeting",
    namespace: "default",
    name: "hello",
    uid: created.metadata.uid,
    resourceVersion: created.metadata.resourceVersion,
    generation: 1,
    type: "ADDED",
    reason: "watch",
    observedAt: new Date().toISOString(),
    traceparent,
  });
  const body = forge ? { ...signed, traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-1111111111111111-01" } : signed;
  const outcome = await handleMessage(runtime, { id: "m-1", body: JSON.stringify(body), receiveCount: 1 });
  return { outcome, spans: exporter.getFinishedSpans() };
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

  it("an event whose MAC does not verify joins no trace (dead-lettered, nothing traced)", async () => {
    const { outcome, spans } = await handled(true);
    assert.equal(outcome.result, "dead-letter");
    assert.deepEqual(spans, []);
  });
});
