// What fell due on an object's schedule (a retry, a requeue, a timer its status records) is a new
// trace, linked to the trace of the change whose reconcile scheduled it: the tracker and the
// publisher as the engine wires them, the spans read from the SDK's own in-memory exporter.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider, type ReadableSpan } from "@opentelemetry/sdk-trace";
import { pino } from "pino";
import { Registry } from "prom-client";
import type { KeyEvent } from "../core/event.ts";
import { createBridgeMetrics } from "./metrics.ts";
import { ParentTracker } from "./parent-tracker.ts";
import { Publisher } from "./publisher.ts";
import type { QueueTransport } from "./transport.ts";
import type { WatchedObject } from "./watched-object.ts";
import { TEST_EVENT_KEY } from "../test/support/event-key.ts";
import { fakeClock } from "../test/support/fake-clock.ts";

const crontabs = { group: "stable.example.com", version: "v1", plural: "crontabs", kind: "CronTab", namespaced: true };
const ct = (rv: string, status: unknown = {}, generation = 1): WatchedObject => ({
  metadata: { name: "p", namespace: "ns", uid: "uid-p", resourceVersion: rv, generation },
  spec: { replicas: generation },
  status,
});

function bridge(traced = true) {
  const clock = fakeClock();
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
  const tracer = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter })] }).getTracer("test");
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
    ...(traced ? { tracer } : {}),
  });
  const parents = new ParentTracker(crontabs, {
    cluster: "c",
    skipStatusOnly: true,
    now: clock.now,
    timers: clock.timers,
    announce: (key, event, cause, options) => publisher.offer(key, event, cause, options),
    ...(traced ? { traceOf: (key: string) => publisher.lastTrace(key) } : {}),
  });
  void parents.releaseInitialWork();
  const changes = (): ReadableSpan[] => exporter.getFinishedSpans().filter((s) => s.name === "bridge change");
  const at = (ms: number) => new Date(clock.nowMs() + ms).toISOString();
  return { clock, sent, parents, changes, at };
}

const settle = async () => {
  for (let i = 0; i < 3; i++) await new Promise((r) => setImmediate(r));
};
const linksOf = (span: ReadableSpan) => span.links.map((l) => [l.context.traceId, l.context.spanId, l.attributes?.["crdfn.link"]]);

describe("scheduled work links to the trace that scheduled it", () => {
  it("a requeue that falls due is a new trace, linked to the change whose reconcile recorded it", async () => {
    const { clock, sent, parents, changes, at } = bridge();
    await parents.upsert(ct("1"), "watch");
    await settle();
    const [first] = changes();
    assert.ok(first, "the object's change is traced");
    // Its function's status write: Ready, and a requeue in 5 s.
    await parents.upsert(ct("2", { observedGeneration: 1, nextReconcile: { at: at(5000), reason: "Requeue" } }), "watch");
    clock.advance(5000);
    await settle();
    assert.equal(sent.length, 2, "the requeue was announced");
    const requeue = changes()[1]!;
    assert.notEqual(requeue.spanContext().traceId, first.spanContext().traceId, "a trace of its own");
    assert.equal(requeue.parentSpanContext, undefined);
    assert.deepEqual(linksOf(requeue), [[first.spanContext().traceId, first.spanContext().spanId, "requeue"]]);
    assert.equal(requeue.attributes["crdfn.cause"], "requeue");
    assert.equal(sent[1]!.traceparent, `00-${requeue.spanContext().traceId}-${requeue.spanContext().spanId}-01`, "its event carries the new trace");

    // The requeue's own reconcile schedules the next: that one links to the requeue's trace, a chain.
    await parents.upsert(ct("3", { observedGeneration: 1, nextReconcile: { at: at(5000), reason: "Requeue" } }), "watch");
    clock.advance(5000);
    await settle();
    assert.deepEqual(linksOf(changes()[2]!), [[requeue.spanContext().traceId, requeue.spanContext().spanId, "requeue"]]);
  });

  it("a retry due at once links too, and a context the function recorded beside the due time wins, as does its timer mark", async () => {
    const { clock, parents, changes, at } = bridge();
    await parents.upsert(ct("1"), "watch");
    await settle();
    const first = changes()[0]!;
    // Due already when seen (a 0 s backoff): announced from the status write itself.
    await parents.upsert(ct("2", { observedGeneration: 1, nextReconcile: { at: at(0), reason: "Retry", attempts: 1 } }), "watch");
    await settle();
    const retry = changes()[1]!;
    assert.deepEqual(linksOf(retry), [[first.spanContext().traceId, first.spanContext().spanId, "retry"]]);
    assert.equal(retry.attributes["crdfn.cause"], "retry");

    const fn = { trace: "4bf92f3577b34da6a3ce929d0e0e4736", span: "00f067aa0ba902b7" };
    const traceparent = `00-${fn.trace}-${fn.span}-01`;
    await parents.upsert(ct("3", { observedGeneration: 1, nextReconcile: { at: at(300_000), reason: "Requeue", timer: true, traceparent } }), "watch");
    clock.advance(300_000);
    await settle();
    const timer = changes()[2]!;
    assert.deepEqual(linksOf(timer), [[fn.trace, fn.span, "timer"]]);
    assert.equal(timer.attributes["crdfn.cause"], "timer");
  });

  it("a change of the object's own is no scheduled work: its trace links to nothing", async () => {
    const { parents, changes, at } = bridge();
    await parents.upsert(ct("1"), "watch");
    await parents.upsert(ct("2", { observedGeneration: 1, nextReconcile: { at: at(5000), reason: "Retry", attempts: 1 } }), "watch");
    await parents.upsert(ct("3", { observedGeneration: 1, nextReconcile: { at: at(5000), reason: "Retry", attempts: 1 } }, 2), "watch");
    await settle();
    assert.deepEqual(
      changes().map((c) => [c.attributes["crdfn.cause"], c.links.length]),
      [
        ["watch", 0],
        ["watch", 0],
      ],
    );
  });

  it("untraced, nothing of it is kept", async () => {
    const { clock, sent, parents, at } = bridge(false);
    await parents.upsert(ct("1"), "watch");
    await parents.upsert(ct("2", { observedGeneration: 1, nextReconcile: { at: at(5000), reason: "Requeue" } }), "watch");
    clock.advance(5000);
    await settle();
    assert.deepEqual(
      sent.map((e) => [e.reason, e.traceparent]),
      [
        ["watch", undefined],
        ["requeue", undefined],
      ],
    );
  });
});
