import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { pino, type Logger } from "pino";
import { encodeKeyEvent, type KeyEvent } from "../../core/event.ts";
import { TEST_EVENT_KEYS, signedForTest } from "../../test/support/event-key.ts";
import { createReceiver } from "./delivery.ts";
import { runtimeByCluster, type Runtime } from "./runtime.ts";

const event = (group: string, plural: string, cluster = "a"): KeyEvent => ({
  v: 1,
  cluster,
  group,
  version: "v1",
  plural,
  kind: "K",
  namespace: "default",
  name: "n",
  uid: "u",
  resourceVersion: "1",
  generation: 1,
  type: "ADDED",
  observedAt: "2026-11-21T00:00:00Z",
});
const signed = (e: KeyEvent): string => encodeKeyEvent(signedForTest({ ...e, v: 3 }));

function logged(): { logger: Logger; lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = [];
  return { logger: pino({ level: "info" }, { write: (l: string) => void lines.push(JSON.parse(l) as Record<string, unknown>) }), lines };
}

describe("receiving a message", () => {
  const served = { keysOf: (cluster: string) => (cluster === "a" ? TEST_EVENT_KEYS : undefined), resources: [{ group: "example.com", plural: "greetings" }] };

  it("gives the verified event of a served cluster and resource, first delivered unless received again or deferred", () => {
    const receive = createReceiver(served, pino({ level: "silent" }));
    const got = receive({ id: "1", body: signed(event("example.com", "greetings")) });
    assert.ok(got.ok);
    assert.equal(got.event.plural, "greetings");
    assert.equal(got.firstDelivery, true);
    const again = receive({ id: "1", body: signed(event("example.com", "greetings")), receiveCount: 2 });
    assert.equal(again.ok && again.firstDelivery, false);
  });

  it("refuses, as dead letters, what is malformed, unsigned, of a cluster or resource not served here; each said once, on its first receive", () => {
    const { logger, lines } = logged();
    const receive = createReceiver(served, logger);
    const refusals = [
      { id: "malformed", body: "nonsense" },
      { id: "unsigned", body: encodeKeyEvent(event("example.com", "greetings")) },
      { id: "cluster", body: signed(event("example.com", "greetings", "b")) },
      { id: "resource", body: signed(event("other.example.com", "widgets")) },
    ];
    const details = refusals.map((m) => receive(m)).map((d) => (d.ok ? "received" : d.outcome.detail));
    assert.deepEqual(details.slice(0, 1), ["malformed key event"]);
    assert.match(details[1] ?? "", /./);
    assert.equal(details[2], "cluster b is not served here");
    assert.equal(details[3], "not a resource served here");
    for (const m of refusals) receive({ ...m, receiveCount: 3 });
    assert.deepEqual(
      lines.map((l) => l.messageId),
      ["malformed", "unsigned", "cluster", "resource"],
      "one line each, on the first receive",
    );
    assert.deepEqual(lines[3]?.served, ["greetings.example.com"]);
  });
});

describe("a runtime per cluster", () => {
  it("is built on its cluster's first event and kept; an event of another cluster is refused before any is built", async () => {
    const builds: string[] = [];
    const tagged = (tag: string): Runtime => ({
      served: { keysOf: () => undefined, resources: [] },
      receive: () => assert.fail("never asked"),
      handle: () => Promise.resolve({ result: "success", detail: tag, apiCalls: 0 }),
    });
    const keys = new Map([
      ["a", TEST_EVENT_KEYS],
      ["b", TEST_EVENT_KEYS],
    ]);
    const runtime = runtimeByCluster(
      keys,
      [{ group: "example.com", plural: "greetings" }],
      (cluster) => (builds.push(cluster), Promise.resolve(tagged(cluster))),
      pino({ level: "silent" }),
    );
    const handle = (body: string) => runtime.handle(runtime.receive({ id: "m", body }));
    assert.equal((await handle(signed(event("example.com", "greetings", "b")))).detail, "b");
    assert.equal((await handle(signed(event("example.com", "greetings", "a")))).detail, "a");
    assert.equal((await handle(signed(event("example.com", "greetings", "b")))).detail, "b");
    assert.equal((await handle(signed(event("example.com", "greetings", "c")))).result, "dead-letter");
    assert.deepEqual(builds, ["b", "a"]);
  });
});
