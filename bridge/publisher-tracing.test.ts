import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider } from "@opentelemetry/sdk-trace";
import { pino } from "pino";
import { Registry } from "prom-client";
import { TRACEPARENT_ANNOTATION, type KeyEvent } from "../core/event.ts";
import { verifyKeyEvent } from "../core/event-auth.ts";
import { createBridgeMetrics } from "./metrics.ts";
import { Publisher } from "./publisher.ts";
import type { QueueTransport } from "./transport.ts";
import { TEST_EVENT_KEY, testKeyring } from "../test/support/event-key.ts";
import { fakeClock } from "../test/support/fake-clock.ts";

const event = (name: string, annotations?: Record<string, string>): KeyEvent => ({
  v: 1,
  cluster: "c",
  group: "example.com",
  version: "v1",
  plural: "greetings",
  kind: "Greeting",
  namespace: "default",
  name,
  uid: `uid-${name}`,
  resourceVersion: "1",
  generation: 1,
  type: "MODIFIED",
  reason: "watch",
  observedAt: new Date(0).toISOString(),
  ...(annotations ? { object: { metadata: { name, uid: `uid-${name}`, resourceVersion: "1", annotations } } } : {}),
});

function publishing(traced: boolean) {
  const sent: KeyEvent[] = [];
  const transport: QueueTransport = {
    noun: "queue",
    maxBatch: 10,
    lingerMs: 0,
    send: (_destination, messages) => {
      sent.push(...messages.map((m) => JSON.parse(m.body) as KeyEvent));
      return Promise.resolve(messages.map(() => ({ ok: true as const })));
    },
    exists: () => Promise.resolve(true),
    close: () => Promise.resolve(),
  };
  const exporter = new InMemorySpanExporter();
  const provider = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter })] });
  const clock = fakeClock();
  const publisher = new Publisher({
    transport,
    destinationOf: () => "q.fifo",
    maxPending: 100,
    concurrency: 1,
    logger: pino({ level: "silent" }),
    metrics: createBridgeMetrics(new Registry()),
    now: () => clock.nowMs(),
    timers: clock.timers,
    eventKey: TEST_EVENT_KEY,
    ...(traced ? { tracer: provider.getTracer("test") } : {}),
  });
  return { publisher, sent, exporter, clock };
}

const settle = () => new Promise((r) => setImmediate(r));

describe("publisher tracing", () => {
  it("traces a change through its hold and send and carries the context in the signed event", async () => {
    const { publisher, sent, exporter, clock } = publishing(true);
    await publisher.offer("a", event("a"), "watch", { holdMs: 500 });
    clock.advance(500);
    await settle();
    await settle();
    assert.equal(sent.length, 1);
    const [signed] = sent;
    assert.deepEqual(verifyKeyEvent(signed!, testKeyring(signed!)), { ok: true }, "the context is under the MAC");
    const spans = new Map(exporter.getFinishedSpans().map((s) => [s.name, s]));
    const [change, hold, send] = ["bridge change", "bridge hold", "bridge send"].map((n) => spans.get(n)!);
    assert.ok(change && hold && send, [...spans.keys()].join());
    assert.equal(signed!.traceparent, `00-${change.spanContext().traceId}-${change.spanContext().spanId}-01`);
    assert.equal(change.parentSpanContext, undefined, "a root: nobody put a context on the object");
    assert.deepEqual([hold.parentSpanContext?.spanId, send.parentSpanContext?.spanId], [change.spanContext().spanId, change.spanContext().spanId]);
    assert.equal(change.attributes["crdfn.object"], "a");
    assert.equal(change.attributes["crdfn.cause"], "watch");
    assert.equal(change.attributes["crdfn.outcome"], "sent");
    assert.equal(hold.attributes["crdfn.hold_ms"], 500);
    assert.equal(hold.attributes["crdfn.linger_ms"], 500);
    assert.equal(send.attributes["crdfn.batch_size"], 1);
  });

  it("continues the trace a writer put on the object", async () => {
    const { publisher, sent, exporter } = publishing(true);
    const writer = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    await publisher.offer("a", event("a", { [TRACEPARENT_ANNOTATION]: writer }), "watch");
    await settle();
    const change = exporter.getFinishedSpans().find((s) => s.name === "bridge change")!;
    assert.equal(change.spanContext().traceId, "4bf92f3577b34da6a3ce929d0e0e4736");
    assert.equal(change.parentSpanContext?.spanId, "00f067aa0ba902b7");
    assert.match(sent[0]!.traceparent ?? "", /^00-4bf92f3577b34da6a3ce929d0e0e4736-/);
  });

  it("untraced: the event carries no trace context", async () => {
    const { publisher, sent } = publishing(false);
    await publisher.offer("a", event("a"), "watch");
    await settle();
    assert.equal(sent.length, 1);
    assert.equal(sent[0]!.traceparent, undefined);
    assert.equal(sent[0]!.tracestate, undefined);
  });
});
