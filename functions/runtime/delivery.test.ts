import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { pino, type Logger } from "pino";
import { deferralSeal } from "../../core/event-auth.ts";
import { encodeKeyEvent, type KeyEvent } from "../../core/event.ts";
import { signedForTest, testKeyring } from "../../test/support/event-key.ts";
import { createReceiver, DEFERRAL_MAC_ATTRIBUTE, DEFERRALS_ATTRIBUTE, DEFERRED_SINCE_ATTRIBUTE, type Received } from "./delivery.ts";
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
const signed = (e: KeyEvent | Record<string, unknown>): string => encodeKeyEvent(signedForTest({ ...e, v: 3 }));

function logged(): { logger: Logger; lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = [];
  return { logger: pino({ level: "info" }, { write: (l: string) => void lines.push(JSON.parse(l) as Record<string, unknown>) }), lines };
}

const GREETINGS = "greetings.example.com";

describe("receiving a message", () => {
  const served = {
    keysOf: (cluster: string, resource: string) => (cluster === "a" && resource === GREETINGS ? testKeyring(GREETINGS) : undefined),
    resources: [{ group: "example.com", plural: "greetings" }],
  };

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

  it("checks the MAC before the schema reads the body: a forged body the schema would refuse is refused for its MAC", () => {
    const receive = createReceiver(served, pino({ level: "silent" }));
    // Not an event the schema takes (generation is no number, an unknown member), with a made-up MAC.
    const forged = JSON.stringify({ ...event("example.com", "greetings"), v: 3, generation: "x", extra: { deep: [1] }, kid: "test", mac: "A".repeat(43) });
    const d = receive({ id: "f", body: forged });
    assert.ok(!d.ok);
    assert.match(d.outcome.detail, /^MAC does not verify \(key id "test"\)$/);
    // The same body, signed by the bridge: past the MAC, the schema refuses it.
    const genuine = receive({ id: "g", body: JSON.stringify(signedForTest({ ...event("example.com", "greetings"), v: 3, generation: "x" })) });
    assert.ok(!genuine.ok);
    assert.equal(genuine.outcome.detail, "malformed key event");
    for (const body of ["[]", "null", "1", JSON.stringify({ cluster: 1, group: "example.com", plural: "greetings" })]) {
      const r = receive({ id: "m", body });
      assert.equal(!r.ok && r.outcome.detail, "malformed key event", body);
    }
  });
});

describe("a deferred message's attributes", () => {
  const served = {
    keysOf: (cluster: string, resource: string) => (cluster === "a" && resource === GREETINGS ? testKeyring(GREETINGS) : undefined),
    resources: [{ group: "example.com", plural: "greetings" }],
  };
  const body = signed(event("example.com", "greetings"));
  const receive = createReceiver(served, pino({ level: "silent" }));
  const first = receive({ id: "1", body }) as Received;

  it("carry a MAC the function makes, and are read back as they were written", () => {
    const attributes = first.deferralAttributes(1_000_000, 2);
    assert.deepEqual(Object.keys(attributes).sort(), [DEFERRAL_MAC_ATTRIBUTE, DEFERRALS_ATTRIBUTE, DEFERRED_SINCE_ATTRIBUTE].sort());
    const copy = receive({ id: "2", body, attributes: { other: "kept", ...attributes } });
    assert.ok(copy.ok);
    assert.equal(copy.firstDelivery, false, "a deferred copy reads the object afresh");
    assert.deepEqual(copy.message.attributes, { other: "kept", ...attributes });
  });

  it("whose MAC does not verify are dropped, and the message is still no first delivery (a fresh read, never the body)", () => {
    const good = first.deferralAttributes(1_000_000, 2);
    const tampered: Array<Record<string, string>> = [
      { ...good, [DEFERRED_SINCE_ATTRIBUTE]: "1" },
      { ...good, [DEFERRALS_ATTRIBUTE]: "0" },
      { [DEFERRED_SINCE_ATTRIBUTE]: "1", [DEFERRALS_ATTRIBUTE]: "1" },
      {
        [DEFERRED_SINCE_ATTRIBUTE]: "1",
        [DEFERRALS_ATTRIBUTE]: "1",
        [DEFERRAL_MAC_ATTRIBUTE]: deferralSeal("another event's mac", "1", "1", Buffer.alloc(32, 7)),
      },
    ];
    for (const attributes of tampered) {
      const d = receive({ id: "t", body, attributes: { other: "kept", ...attributes } });
      assert.ok(d.ok);
      assert.equal(d.firstDelivery, false);
      assert.deepEqual(d.message.attributes, { other: "kept" }, JSON.stringify(attributes));
    }
    // Bound to its event: the attributes of one event's copy prove nothing for another's.
    const other = signed({ ...event("example.com", "greetings"), name: "other" });
    const moved = receive({ id: "o", body: other, attributes: good });
    assert.ok(moved.ok);
    assert.deepEqual(moved.message.attributes, {});
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
      ["a", new Map([[GREETINGS, testKeyring(GREETINGS)]])],
      ["b", new Map([[GREETINGS, testKeyring(GREETINGS)]])],
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
