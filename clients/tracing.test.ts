import assert from "node:assert/strict";
import { createServer } from "node:net";
import { describe, it } from "node:test";
import { DOWN_FLUSH_MS, fieldsOf, startTracing, tracingSettings } from "./tracing.ts";

describe("tracing", () => {
  it("is off unless an OTLP endpoint is set, and then traces nothing and carries no context", async () => {
    assert.equal(tracingSettings({}, "crdfn-bridge"), undefined);
    assert.equal(tracingSettings({ OTEL_SERVICE_NAME: "x", OTEL_TRACES_SAMPLER: "always_on" }, "crdfn-bridge"), undefined);
    const endpoint = { OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:4318" };
    assert.equal(tracingSettings({ ...endpoint, OTEL_SDK_DISABLED: "true" }, "b"), undefined);
    assert.equal(tracingSettings({ ...endpoint, OTEL_TRACES_EXPORTER: "none" }, "b"), undefined);
    const off = await startTracing(undefined);
    assert.equal(off.enabled, false);
    const span = off.tracer.startSpan("watch event");
    assert.equal(span.isRecording(), false);
    assert.deepEqual(fieldsOf(span), {}, "an untraced event has no traceparent");
    span.end();
    await off.flush(10);
  });

  it("reads the standard variables: the traces endpoint over the base one, parent-based sampling by default", () => {
    assert.deepEqual(tracingSettings({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318/" }, "crdfn-bridge"), {
      url: "http://c:4318/v1/traces",
      serviceName: "crdfn-bridge",
      sampler: "parentbased_always_on",
      ratio: 1,
    });
    const both = { OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://t:4318/traces" };
    assert.equal(tracingSettings(both, "b")?.url, "http://t:4318/traces");
    const ratio = tracingSettings(
      { ...both, OTEL_TRACES_SAMPLER: "parentbased_traceidratio", OTEL_TRACES_SAMPLER_ARG: "0.25", OTEL_SERVICE_NAME: "mine" },
      "b",
    );
    assert.deepEqual([ratio?.sampler, ratio?.ratio, ratio?.serviceName], ["parentbased_traceidratio", 0.25, "mine"]);
    assert.throws(() => tracingSettings({ ...both, OTEL_TRACES_SAMPLER: "sometimes" }, "b"), /OTEL_TRACES_SAMPLER: "sometimes" is none of/);
    assert.throws(() => tracingSettings({ ...both, OTEL_TRACES_SAMPLER_ARG: "2" }, "b"), /OTEL_TRACES_SAMPLER_ARG/);
    assert.throws(() => tracingSettings({ OTEL_EXPORTER_OTLP_ENDPOINT: "not a url" }, "b"), /not a URL/);
  });

  it("a collector that never answers costs a flush its bound once, then only a short wait until an export gets through", async () => {
    const hole = createServer(() => {});
    await new Promise<void>((resolve) => hole.listen(0, "127.0.0.1", resolve));
    try {
      const port = (hole.address() as { port: number }).port;
      const tracing = await startTracing(tracingSettings({ OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}` }, "b"));
      const timed = async (): Promise<number> => {
        tracing.tracer.startSpan("s").end();
        const at = performance.now();
        await tracing.flush(600);
        return performance.now() - at;
      };
      const first = await timed();
      assert.ok(first >= 590 && first < 1500, `first flush ${first} ms`);
      for (let i = 0; i < 3; i++) {
        const next = await timed();
        assert.ok(next < DOWN_FLUSH_MS + 300, `flush ${next} ms while down`);
      }
      await tracing.shutdown(100);
    } finally {
      hole.close();
    }
  });
});
