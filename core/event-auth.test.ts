import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { hkdfSync } from "node:crypto";
import {
  deferralSeal,
  formatEventKey,
  operatorKey,
  operatorResource,
  parseEventKey,
  parseEventKeys,
  signingKey,
  signKeyEvent,
  verifyDeferralSeal,
  verifyKeyEvent,
  type EventKey,
} from "./event-auth.ts";
import { encodeKeyEvent, parseKeyEvent, type KeyEvent } from "./event.ts";

const eventKeyOf = (kid: string, fill: number): EventKey => ({ kid, secret: Buffer.alloc(32, fill) });
const k1 = eventKeyOf("k1", 1);
const k2 = eventKeyOf("k2", 2);
const ring = (...keys: EventKey[]) => new Map(keys.map((k) => [k.kid, k.secret]));

const event: KeyEvent = {
  v: 2,
  cluster: "prod-a",
  group: "example.com",
  version: "v1",
  plural: "greetings",
  kind: "Greeting",
  namespace: "demo",
  name: "hello",
  uid: "u-1",
  resourceVersion: "42",
  generation: 3,
  type: "MODIFIED",
  reason: "watch",
  observedAt: "2026-11-25T00:00:00Z",
  object: { metadata: { name: "hello", uid: "u-1", resourceVersion: "42" }, spec: { message: "hi", n: [1, 2] } },
  children: [{ apiVersion: "v1", kind: "ConfigMap", namespace: "demo", name: "hello", uid: "c-1", resourceVersion: "40", appliedHash: "abc" }],
};

/** What a function receives: the signed event through the queue (JSON and the schema). */
function received(e: KeyEvent): KeyEvent {
  const parsed = parseKeyEvent(encodeKeyEvent(e));
  assert.ok(parsed.ok, parsed.ok ? "" : parsed.error);
  return parsed.event;
}

describe("event MAC", () => {
  it("a key imported once signs as its bytes do: either verifies against either", () => {
    const imported = signKeyEvent(event, signingKey(k1));
    assert.deepEqual(imported, signKeyEvent(event, k1));
    assert.ok(verifyKeyEvent(imported, ring(k1)).ok);
    const [parsed] = parseEventKeys(formatEventKey(k1), "prod-a");
    assert.ok(verifyKeyEvent(signKeyEvent(event, k1), new Map([["k1", parsed!.secret]])).ok);
    assert.ok(!verifyKeyEvent(signKeyEvent(event, signingKey(k2)), new Map([["k2", parsed!.secret]])).ok);
  });

  it("a signed event is v3, carries its kid and verifies after the queue, whatever order its keys come in", () => {
    const signed = signKeyEvent(event, k1);
    assert.equal(signed.v, 3);
    assert.equal(signed.kid, "k1");
    assert.deepEqual(verifyKeyEvent(received(signed), ring(k1)), { ok: true });
    // The API server may reorder an object's keys; JSON keeps the order given: still the same event.
    const reordered = Object.fromEntries(Object.entries(received(signed)).reverse()) as KeyEvent;
    const shuffled = { ...reordered, object: { spec: signed.object!.spec, metadata: signed.object!.metadata } } as KeyEvent;
    assert.deepEqual(verifyKeyEvent(shuffled, ring(k1)), { ok: true });
    // Signing again (a superseded event re-signed) replaces the old MAC rather than covering it.
    assert.deepEqual(verifyKeyEvent(signKeyEvent(signed, k2), ring(k2)), { ok: true });
  });

  it("any change to any part is refused: naming, version, body, children, kid", () => {
    const signed = received(signKeyEvent(event, k1));
    const tampered: Array<[string, KeyEvent]> = [
      ["cluster", { ...signed, cluster: "prod-b" }],
      ["name", { ...signed, name: "other" }],
      ["resourceVersion", { ...signed, resourceVersion: "43" }],
      ["generation", { ...signed, generation: 4 }],
      ["type", { ...signed, type: "DELETED" }],
      ["reason", { ...signed, reason: "resync" }],
      ["observedAt", { ...signed, observedAt: "2026-11-25T00:00:01Z" }],
      ["spec", { ...signed, object: { ...signed.object!, spec: { message: "FORGED-BY-QUEUE-SENDER", n: [1, 2] } } }],
      ["body removed", (({ object: _o, ...rest }) => rest)(signed)],
      ["body added field", { ...signed, object: { ...signed.object!, extra: true } }],
      ["children dropped", { ...signed, children: [] }],
      ["children removed", (({ children: _c, ...rest }) => rest)(signed)],
      ["child hash", { ...signed, children: [{ ...signed.children![0]!, appliedHash: "def" }] }],
    ];
    for (const [what, e] of tampered) {
      const v = verifyKeyEvent(e, ring(k1));
      assert.equal(v.ok, false, what);
      assert.equal(!v.ok && v.why, "mismatch", what);
      assert.match(!v.ok ? v.message : "", /^MAC does not verify/, what);
    }
    const otherKid = verifyKeyEvent({ ...signed, kid: "k2" }, ring(k1, k2));
    assert.equal(!otherKid.ok && otherKid.why, "mismatch", "a MAC made with k1 does not pass as k2's");
  });

  it("the trace context is under the MAC: a function continues only the trace its bridge signed", () => {
    const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    const signed = received(signKeyEvent({ ...event, traceparent, tracestate: "crdfn=1" }, k1));
    assert.equal(signed.traceparent, traceparent);
    assert.deepEqual(verifyKeyEvent(signed, ring(k1)), { ok: true });
    const tampered: Array<[string, KeyEvent]> = [
      ["trace id", { ...signed, traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4737-00f067aa0ba902b7-01" }],
      ["parent span", { ...signed, traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b8-01" }],
      ["sampled flag", { ...signed, traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00" }],
      ["traceparent removed", (({ traceparent: _t, ...rest }) => rest)(signed)],
      ["tracestate", { ...signed, tracestate: "crdfn=2" }],
      ["traceparent added", { ...received(signKeyEvent(event, k1)), traceparent }],
    ];
    for (const [what, e] of tampered) assert.equal(verifyKeyEvent(e, ring(k1)).ok, false, what);
  });

  it("a wrong key, an unknown kid and no MAC at all are refused, each saying which", () => {
    const forged = received(signKeyEvent(event, { kid: "k1", secret: Buffer.alloc(32, 9) }));
    const wrong = verifyKeyEvent(forged, ring(k1));
    assert.equal(!wrong.ok && wrong.why, "mismatch");
    const unknown = verifyKeyEvent(received(signKeyEvent(event, eventKeyOf("k9", 1))), ring(k1));
    assert.equal(!unknown.ok && unknown.why, "unknown-key");
    assert.match(!unknown.ok ? unknown.message : "", /key id "k9" is not one this function accepts for cluster "prod-a"/);
    const unsigned = verifyKeyEvent(event, ring(k1));
    assert.equal(!unsigned.ok && unsigned.why, "unsigned");
    assert.match(!unsigned.ok ? unsigned.message : "", /^MAC does not verify: the event carries none \(a v2 event/);
    // Nothing it says holds a secret.
    for (const v of [wrong, unknown, unsigned]) assert.ok(!v.ok && !v.message.includes(k1.secret.toString("base64")));
  });

  it("rotation: the functions accept old and new while the bridge moves to the new; dropping the old refuses it", () => {
    const old = received(signKeyEvent(event, k1));
    const fresh = received(signKeyEvent(event, k2));
    for (const e of [old, fresh]) assert.deepEqual(verifyKeyEvent(e, ring(k1, k2)), { ok: true });
    assert.equal(verifyKeyEvent(old, ring(k2)).ok, false);
  });

  it("the schema: v3 carries kid and mac, older versions neither", () => {
    const signed = signKeyEvent(event, k1);
    assert.equal(parseKeyEvent(JSON.stringify({ ...signed, v: 2 })).ok, false);
    assert.equal(parseKeyEvent(JSON.stringify({ ...event, v: 3 })).ok, false);
    assert.equal(parseKeyEvent(JSON.stringify((({ kid: _k, ...rest }) => rest)(signed))).ok, false);
    assert.equal(
      parseKeyEvent(JSON.stringify(event)).ok,
      true,
      "an unsigned v2 still parses: refusing it is the functions' verification, with its own log line",
    );
  });

  it("compares MACs in constant time (timingSafeEqual), never with === on strings", () => {
    const source = readFileSync(new URL("./event-auth.ts", import.meta.url), "utf8");
    assert.match(source, /timingSafeEqual\(given, expected\)/);
    assert.doesNotMatch(source, /mac\s*[!=]==?\s*(?!undefined)[A-Za-z"`(]|(given|expected)\s*[!=]==?\s*[A-Za-z]|\.equals\(/);
  });
});

describe("event key settings", () => {
  const secret = Buffer.alloc(32, 5).toString("base64");
  it("parses <kid>:<secret> in base64 or base64url and formats it back", () => {
    const key = parseEventKey(`k1:${secret}`);
    assert.equal(key.kid, "k1");
    assert.equal(formatEventKey(key), `k1:${secret}`);
    assert.deepEqual(parseEventKey(`k1:${Buffer.alloc(32, 0xfb).toString("base64url")}`).secret, Buffer.alloc(32, 0xfb));
  });
  it("refuses a short secret, a bad kid, no colon, naming the problem and never the secret", () => {
    assert.throws(() => parseEventKey(`k1:${Buffer.alloc(16, 1).toString("base64")}`), /has 16 bytes; it needs at least 32/);
    assert.throws(() => parseEventKey(`k 1:${secret}`), /key id "k 1" must be/);
    assert.throws(
      () => parseEventKey(secret),
      (e: Error) => /must be <kid>:<secret>/.test(e.message) && !e.message.includes(secret),
    );
  });
  it("the functions' list: per cluster, several kids, the cluster part optional for the one cluster served, the operator's where one is", () => {
    const keys = parseEventKeys(`a/k1:${secret}, a/k2:${secret},b/k1:${secret},b/greetings.example.com:k3:${secret}`, undefined);
    assert.deepEqual(
      keys.map((k) => [k.cluster, k.resource, k.kid]),
      [
        ["a", undefined, "k1"],
        ["a", undefined, "k2"],
        ["b", undefined, "k1"],
        ["b", "greetings.example.com", "k3"],
      ],
    );
    assert.deepEqual(
      parseEventKeys(`k1:${secret}`, "default").map((k) => k.cluster),
      ["default"],
    );
    assert.throws(() => parseEventKeys(`k1:${secret}`, undefined), /key 1 names no cluster/);
    assert.throws(() => parseEventKeys(`a/k1:${secret},a/k1:${secret}`, undefined), /key id "k1" is given twice for cluster "a"/);
    assert.throws(
      () => parseEventKeys(`a/w.example.com:k1:${secret},a/w.example.com:k1:${secret}`, undefined),
      /key id "k1" is given twice for operator w.example.com of cluster "a"/,
    );
    assert.throws(() => parseEventKeys(`a/x:y:k1:${secret}`, undefined), /must be \[<plural>.<group>:\]<kid>:<secret>/);
  });
});

describe("keys per operator", () => {
  const cluster = eventKeyOf("k1", 1);
  it("are HKDF-SHA256 of the cluster key, the operator's resource the info: one per operator, the cluster key's kid", () => {
    const greetings = operatorKey(cluster, "greetings.example.com");
    assert.equal(greetings.kid, "k1");
    assert.deepEqual(greetings.secret, Buffer.from(hkdfSync("sha256", cluster.secret, "crdfn.io/operator-event-key/v1", "greetings.example.com", 32)));
    assert.notDeepEqual(greetings.secret, operatorKey(cluster, "crontabs.stable.example.com").secret);
    assert.notDeepEqual(greetings.secret, cluster.secret);
    assert.deepEqual(operatorKey(cluster, "greetings.example.com"), greetings, "the same everywhere: the bridge and a deploy derive alike");
    assert.notDeepEqual(operatorKey(eventKeyOf("k1", 2), "greetings.example.com").secret, greetings.secret);
    assert.equal(operatorResource({ group: "example.com", plural: "greetings" }), "greetings.example.com");
    assert.throws(() => operatorKey(cluster, "Greetings/x"), /is not an operator's resource/);
  });
  it("one operator's key verifies its own events only", () => {
    const greetings = operatorKey(cluster, "greetings.example.com");
    const crontabs = operatorKey(cluster, "crontabs.stable.example.com");
    const signed = signKeyEvent(event, greetings);
    assert.deepEqual(verifyKeyEvent(received(signed), ring(greetings)), { ok: true });
    assert.equal(verifyKeyEvent(received(signed), ring(crontabs)).ok, false);
    assert.equal(verifyKeyEvent(received(signed), ring(cluster)).ok, false, "nor the cluster key: the bridge signs with the operator's");
  });
  it("a deferral's MAC binds its values to one event's MAC and key", () => {
    const secret = Buffer.alloc(32, 3);
    const seal = deferralSeal("mac-of-e", "1000", "2", secret);
    assert.equal(verifyDeferralSeal("mac-of-e", "1000", "2", seal, secret), true);
    assert.equal(verifyDeferralSeal("mac-of-e", "1001", "2", seal, secret), false);
    assert.equal(verifyDeferralSeal("mac-of-e", "1000", "3", seal, secret), false);
    assert.equal(verifyDeferralSeal("mac-of-f", "1000", "2", seal, secret), false);
    assert.equal(verifyDeferralSeal("mac-of-e", "1000", "2", seal, Buffer.alloc(32, 4)), false);
    assert.equal(verifyDeferralSeal("mac-of-e", "1000", "2", "short", secret), false);
  });
});
