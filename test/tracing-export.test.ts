import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { SpanKind } from "@opentelemetry/api";
import { contextFrom, fieldsOf, startTracing, tracingOff, tracingSettings, within } from "../clients/tracing.ts";
import { startOtlpReceiver } from "./support/otlp-receiver.ts";

describe("tracing export (clients/tracing.ts) to a real OTLP/HTTP receiver", () => {
  it("exports to a real OTLP/HTTP receiver on flush; a context carried as fields continues the trace", async () => {
    const receiver = await startOtlpReceiver();
    try {
      const bridge = await startTracing(tracingSettings({ OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint }, "crdfn-bridge"));
      const fn = await startTracing(tracingSettings({ OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint }, "crdfn-function"));
      assert.equal(bridge.enabled, true);
      const change = bridge.tracer.startSpan("watch event", { attributes: { "crdfn.object": "demo/hello" } });
      const fields = fieldsOf(change);
      assert.match(fields.traceparent ?? "", /^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
      change.end();
      const handled = fn.tracer.startSpan("handle", { kind: SpanKind.CONSUMER }, contextFrom(fields));
      fn.tracer.startSpan("reconcile", {}, within(contextFrom(fields), handled)).end();
      handled.end();
      await Promise.all([bridge.flush(5000), fn.flush(5000)]);
      const byName = new Map(receiver.spans.map((s) => [s.name, s]));
      const [root, handle, reconcile] = ["watch event", "handle", "reconcile"].map((n) => byName.get(n)!);
      assert.ok(root && handle && reconcile, JSON.stringify(receiver.spans.map((s) => s.name)));
      assert.equal(root.parentSpanId, "");
      assert.equal(root.service, "crdfn-bridge");
      assert.equal(root.attributes["crdfn.object"], "demo/hello");
      assert.deepEqual([handle.traceId, reconcile.traceId], [root.traceId, root.traceId]);
      assert.deepEqual([handle.parentSpanId, reconcile.parentSpanId], [root.spanId, handle.spanId]);
      assert.equal(handle.service, "crdfn-function");
      await Promise.all([bridge.shutdown(1000), fn.shutdown(1000)]);
    } finally {
      await receiver.close();
    }
  });

  it("a flush with the collector gone returns within its bound", async () => {
    const receiver = await startOtlpReceiver();
    const endpoint = receiver.endpoint;
    await receiver.close();
    const tracing = await startTracing(tracingSettings({ OTEL_EXPORTER_OTLP_ENDPOINT: endpoint }, "b"));
    tracing.tracer.startSpan("lost").end();
    const started = Date.now();
    await tracing.flush(300);
    assert.ok(Date.now() - started < 2000, `${Date.now() - started} ms`);
    await tracing.shutdown(300);
    assert.equal(tracingOff().enabled, false);
  });
});
