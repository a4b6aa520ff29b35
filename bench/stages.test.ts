import { describe, it } from "node:test";
import assert from "node:assert/strict";
import type { ReceivedSpan } from "../test/support/otlp-receiver.ts";
import { changeStages, coveredMs, formatStages, formatTracingCost, stageBreakdown } from "./stages.ts";

const T0 = 1_700_000_000_000; // epoch ms
let ids = 0;
/** A span of trace `trace` from `from` to `to` ms after T0. */
function span(trace: string, name: string, from: number, to: number, parent?: ReceivedSpan): ReceivedSpan {
  const ns = (at: number) => BigInt(Math.round((T0 + at) * 1000)) * 1000n;
  return {
    traceId: trace,
    spanId: `s${++ids}`,
    parentSpanId: parent?.spanId ?? "",
    name,
    startNs: ns(from),
    endNs: ns(to),
    attributes: {},
    statusCode: 0,
    service: name.startsWith("bridge") ? "crdfn-bridge" : "crdfn-functions",
  };
}

/** One change as the contract names its spans: 10 ms in the bridge, 20 in the queue, a 30 ms handling. */
function change(trace: string, at: number, o: { queueWait?: boolean } = {}): ReceivedSpan[] {
  const root = span(trace, "bridge change", at, at + 10);
  const handle = span(trace, "function handle", at + 30, at + 60, root);
  const read = span(trace, "function read", at + 31, at + 36, handle);
  const write = span(trace, "function write", at + 45, at + 58, handle);
  return [
    root,
    span(trace, "bridge hold", at, at + 6, root),
    span(trace, "bridge send", at + 6, at + 10, root),
    ...(o.queueWait ? [span(trace, "queue wait", at + 10, at + 30, handle)] : []),
    handle,
    read,
    span(trace, "kube GET greetings", at + 32, at + 35, read),
    span(trace, "reconcile", at + 37, at + 41, handle),
    write,
    // Two writes at once: the overhead counts their overlap once, the writes' sum both.
    span(trace, "kube PATCH configmaps", at + 46, at + 52, write),
    span(trace, "kube PATCH configmaps", at + 48, at + 54, write),
    span(trace, "kube PUT greetings/status", at + 54, at + 57, write),
  ];
}

describe("where a change's time goes, from its spans", () => {
  it("counts time the spans cover once, inside the span they are under", () => {
    const within = span("t", "function handle", 0, 100);
    assert.equal(coveredMs(within, [span("t", "a", 10, 20), span("t", "b", 15, 30), span("t", "c", 90, 120), span("t", "d", -10, 5)]), 35);
  });

  it("splits one change into hand-off, queue, overhead and writes", () => {
    const s = changeStages(change("a", 0));
    // Handling 30 ms less the GET (3), reconcile (4) and the writes covering 46–57 (11).
    assert.deepEqual(s, { "bridge hand-off": 10, queue: 20, "function overhead": 12, "API writes": 15, tracedMs: 60 });
  });

  it("takes the queue from the function's own wait span when there is one", () => {
    const spans = change("a", 0, { queueWait: true }).map((x) => (x.name === "queue wait" ? { ...x, startNs: x.startNs + 5_000_000n } : x));
    assert.equal(changeStages(spans).queue, 15);
  });

  it("charges each handling of a change redelivered, and its first delivery's queue time", () => {
    const spans = change("a", 0);
    const root = spans[0]!;
    const again = span("a", "function handle", 100, 110, root);
    const s = changeStages([...spans, again, span("a", "kube PATCH greetings/status", 102, 106, again)]);
    assert.equal(s.queue, 20);
    assert.equal(s["function overhead"], 12 + 6);
    assert.equal(s["API writes"], 15 + 4);
    assert.equal(s.tracedMs, 110);
  });

  it("a change no function handled has only its hand-off", () => {
    assert.deepEqual(changeStages(change("a", 0).slice(0, 3)), { "bridge hand-off": 10 });
  });

  it("spreads the stages over the changes the bridge began in the window, and names what never arrived", () => {
    const spans = [...change("a", 0), ...change("b", 1000), ...change("c", 5000)];
    const unsent = { ...span("d", "bridge change", 1500, 1510), attributes: { "crdfn.cause": "child", "crdfn.outcome": "withdrawn" } };
    const b = stageBreakdown([...spans, unsent], { fromMs: T0, toMs: T0 + 2000 });
    assert.equal(b.changes, 3);
    assert.equal(b.handled, 2);
    assert.deepEqual(b.unhandled, { "child withdrawn": 1 });
    assert.match(
      formatStages(b, { samples: 2, p50Ms: 80, p95Ms: 90, p99Ms: 95, maxMs: 99, meanMs: 85 }),
      /3 changes traced, 2 handled by a function \(the others by the bridge's cause and outcome: child withdrawn 1\)/,
    );
    assert.deepEqual(b.stages.queue, { samples: 2, p50Ms: 20, p99Ms: 20 });
    assert.deepEqual(b.missing, ["queue wait"]);
    const onlyBridge = stageBreakdown(spans.filter((s) => s.name.startsWith("bridge")));
    assert.deepEqual(onlyBridge.missing, ["queue wait", "function handle", "reconcile", "kube <METHOD> <resource>"]);
    assert.equal(onlyBridge.stages.queue.samples, 0);
    assert.match(formatStages(onlyBridge, { samples: 3, p50Ms: 80, p95Ms: 90, p99Ms: 95, maxMs: 99, meanMs: 85 }), /function overhead +\| +0 \| +– \| +–/);
  });

  it("prints tracing's price as on against off", () => {
    const table = formatTracingCost({ cpuMsPerChange: 10, p50Ms: 50, changes: 100 }, { cpuMsPerChange: 12, p50Ms: 49, changes: 100 });
    assert.match(table, /on − off .*\+20 % \| +-2 %/);
  });
});
