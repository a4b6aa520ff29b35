import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { encodeKeyEvent, MAX_EVENT_BYTES, parseKeyEvent, supersede, TRACE_CONTEXT_BYTES, withinCap, type ChildKey, type KeyEvent } from "./event.ts";

const event = (reason: string | undefined, resourceVersion = "12"): KeyEvent => ({
  v: 1,
  cluster: "a",
  group: "example.com",
  version: "v1",
  plural: "greetings",
  kind: "Greeting",
  namespace: "default",
  name: "g",
  uid: "u-1",
  resourceVersion,
  generation: 2,
  type: "MODIFIED",
  ...(reason === undefined ? {} : { reason }),
  observedAt: "2026-11-22T09:00:00.000Z",
});

describe("key events", () => {
  it("v2 carries the object at the announced version and its children's keys; v1 still parses", () => {
    const object = {
      apiVersion: "example.com/v1",
      kind: "Greeting",
      metadata: { name: "g", namespace: "default", uid: "u-1", resourceVersion: "12" },
      spec: { message: "hi" },
    };
    const children = [{ apiVersion: "v1", kind: "ConfigMap", namespace: "default", name: "g-greeting", uid: "c-1", resourceVersion: "11", appliedHash: "abc" }];
    assert.equal(parseKeyEvent(JSON.stringify({ ...event("watch"), v: 2, object, children })).ok, true);
    assert.equal(parseKeyEvent(JSON.stringify(event("watch"))).ok, true, "v1");
    const older = parseKeyEvent(JSON.stringify({ ...event("watch"), v: 2, object: { ...object, metadata: { ...object.metadata, resourceVersion: "9" } } }));
    assert.equal(older.ok, false, "a body of another version than the one named is refused");
  });

  it("refuses an event over the size the queue takes", () => {
    const big = { apiVersion: "v1", kind: "X", metadata: { name: "g", uid: "u-1", resourceVersion: "12" }, blob: "x".repeat(MAX_EVENT_BYTES) };
    assert.equal(parseKeyEvent(JSON.stringify({ ...event("watch"), v: 2, object: big })).ok, false);
  });

  it("a parent of any size is announced: past the cap without its body, then without its children's keys (unknown)", () => {
    const object = { metadata: { name: "g", uid: "u-1", resourceVersion: "12" }, blob: "x".repeat(200 * 1024) };
    const key = (i: number): ChildKey => ({
      apiVersion: "v1",
      kind: "ConfigMap",
      namespace: "default",
      name: `g-${i}`,
      uid: `00000000-0000-4000-8000-${String(i).padStart(12, "0")}`,
      resourceVersion: String(1000 + i),
      appliedHash: "0123456789abcdef0123456789abcdef",
    });
    const small = { ...event("watch"), v: 2 as const, object, children: [key(1)] };
    assert.deepEqual(withinCap(small), { event: small, bytes: Buffer.byteLength(JSON.stringify(small)) }, "what fits is left alone");
    const some = Array.from({ length: 300 }, (_, i) => key(i));
    const { event: bodyOff } = withinCap({ ...small, children: some });
    assert.equal(bodyOff.object, undefined);
    assert.equal(bodyOff.children?.length, 300);
    for (const n of [1500, 5000]) {
      const { event: keysOff } = withinCap({ ...small, children: Array.from({ length: n }, (_, i) => key(i)) });
      assert.equal(keysOff.object, undefined);
      assert.equal(keysOff.children, undefined, `${n} children`);
      assert.ok(Buffer.byteLength(encodeKeyEvent(keysOff)) < 1024);
    }
  });

  it("keeps the room a sender reserves: an event that fits only without it goes without its body", () => {
    const object = { metadata: { name: "g", uid: "u-1", resourceVersion: "12" }, blob: "" };
    const bare = { ...event("watch"), v: 2 as const, object };
    const fill = MAX_EVENT_BYTES - Buffer.byteLength(JSON.stringify(bare)) - 10;
    const nearlyFull = { ...bare, object: { ...object, blob: "x".repeat(fill) } };
    assert.equal(withinCap(nearlyFull).event.object, nearlyFull.object, "fits with no room reserved");
    const reserved = withinCap(nearlyFull, 60);
    assert.equal(reserved.event.object, undefined, "does not fit once 60 bytes are kept free");
    assert.equal(reserved.bytes, Buffer.byteLength(JSON.stringify(reserved.event)) + 60, "its size counts the room kept");
  });

  it("carries a W3C trace context, within room of its own: a sender that reserves it stays under the cap", () => {
    const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    assert.equal(parseKeyEvent(JSON.stringify({ ...event("watch"), traceparent, tracestate: "a=1" })).ok, true);
    for (const bad of ["01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", `00-${"0".repeat(32)}-00f067aa0ba902b7-01`, "00-4BF92F35"]) {
      assert.equal(parseKeyEvent(JSON.stringify({ ...event("watch"), traceparent: bad })).ok, false, bad);
    }
    assert.equal(parseKeyEvent(JSON.stringify({ ...event("watch"), tracestate: "t".repeat(513) })).ok, false, "W3C's 512 characters at most");
    // The longest name the contract allows still takes a trace context: it is outside the naming cap.
    const longest = { ...event("watch"), name: "n".repeat(253), traceparent, tracestate: "t".repeat(512) };
    assert.equal(parseKeyEvent(JSON.stringify(longest)).ok, true);
    const object = { metadata: { name: "g", uid: "u-1", resourceVersion: "12" }, blob: "" };
    const bare = { ...event("watch"), v: 2 as const, object };
    const fill = MAX_EVENT_BYTES - Buffer.byteLength(JSON.stringify(bare)) - 10;
    const sized = withinCap({ ...bare, object: { ...object, blob: "x".repeat(fill) } }, TRACE_CONTEXT_BYTES);
    assert.equal(sized.event.object, undefined, "reserved, the context cannot push it over");
    const traced = {
      ...withinCap({ ...bare, object: { ...object, blob: "x".repeat(fill - TRACE_CONTEXT_BYTES) } }, TRACE_CONTEXT_BYTES).event,
      traceparent,
      tracestate: "t".repeat(512),
    };
    assert.ok(traced.object !== undefined && Buffer.byteLength(encodeKeyEvent(traced)) <= MAX_EVENT_BYTES);
  });

  it("encodes what the contract carries, checking the body's identity without parsing the body", () => {
    const object = { apiVersion: "v1", kind: "X", metadata: { name: "g", uid: "u-1", resourceVersion: "12", labels: { a: "b" } }, spec: { n: [1, 2] } };
    const carried = { ...event("watch"), v: 2 as const, object };
    assert.deepEqual(JSON.parse(encodeKeyEvent(carried)), carried, "the body goes whole");
    assert.throws(() => encodeKeyEvent({ ...carried, object: { ...object, metadata: { ...object.metadata, uid: "u-2" } } }), /announced version/);
    assert.throws(() => encodeKeyEvent({ ...carried, object: { ...object, metadata: { name: "g", uid: "u-1" } } } as unknown as KeyEvent), /resourceVersion/);
    assert.throws(() => encodeKeyEvent({ ...carried, name: "Not a name!" }), /name/);
    assert.throws(() => encodeKeyEvent({ ...carried, object: { ...object, blob: "x".repeat(MAX_EVENT_BYTES) } }), /at most 245760 bytes/);
  });

  it("a newer announcement without a body keeps the waiting one's body of the same version", () => {
    const object = { metadata: { name: "g", uid: "u-1", resourceVersion: "12" } };
    assert.deepEqual(supersede({ ...event("watch"), object }, event("child")).object, object);
    assert.equal(supersede({ ...event("watch", "10"), object: { metadata: { ...object.metadata, resourceVersion: "10" } } }, event("child")).object, undefined);
  });

  it("a newer own change replacing a waiting child announcement keeps the child's reason", () => {
    assert.deepEqual(supersede(event("child", "10"), event("watch", "12")), event("child", "12"));
    assert.deepEqual(supersede(event("resync", "10"), event("watch", "12")), event("resync", "12"));
    assert.deepEqual(supersede(event("watch", "10"), event("child", "12")), event("child", "12"));
    assert.deepEqual(supersede(event("watch", "10"), event("watch", "12")), event("watch", "12"));
  });

  it("a malformed body is a value, not a throw", () => {
    assert.equal(parseKeyEvent("{nope").ok, false);
    assert.equal(parseKeyEvent(JSON.stringify(event("watch"))).ok, true);
  });
});
