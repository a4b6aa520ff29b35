// The store of a starting bridge's listed bodies: what it keeps comes back byte for byte, its
// bound holds, and chunks are freed as their bodies are taken, in any order.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { KeptBodies } from "./kept-bodies.ts";

describe("KeptBodies", () => {
  it("gives back what it kept, multi-byte characters included, and frees a chunk once all of it is taken", () => {
    const store = new KeptBodies(1024, 64);
    const bodies = ["{}", '{"message":"Grüße, 世界"}', "x".repeat(64), '{"a":1}'];
    const handles = bodies.map((b) => store.keep(b));
    assert.ok(handles.every((h) => h !== undefined));
    assert.equal(store.bytes, 3 * 64, "the 64-byte body took a chunk of its own, the next one a third");
    assert.equal(store.take(handles[1]!), bodies[1]);
    assert.equal(store.bytes, 3 * 64, "the first chunk still holds {}");
    store.drop(handles[0]!);
    assert.equal(store.bytes, 2 * 64);
    assert.equal(store.take(handles[3]!), bodies[3]);
    assert.equal(store.take(handles[2]!), bodies[2]);
    assert.equal(store.bytes, 0);
  });

  it("keeps at most its limit, takes nothing larger than a chunk, and has room again once bodies are taken", () => {
    const store = new KeptBodies(200, 100);
    assert.equal(store.keep("y".repeat(101)), undefined);
    const kept = Array.from({ length: 5 }, () => store.keep("z".repeat(45)));
    assert.deepEqual(
      kept.map((h) => h !== undefined),
      [true, true, true, true, false],
    );
    assert.equal(store.bytes, 200);
    for (const h of kept.slice(0, 2)) store.take(h!);
    const again = store.keep("w".repeat(45));
    assert.ok(again !== undefined);
    assert.equal(store.take(again), "w".repeat(45));
  });

  it("hands out safe integers from its last slot", () => {
    const store = new KeptBodies(2 ** 30, 8);
    const handles: number[] = [];
    for (let h = store.keep("12345678"); h !== undefined; h = store.keep("12345678")) handles.push(h);
    assert.equal(handles.length, 2 ** 17, "as many chunks as a handle can name");
    assert.ok(Number.isSafeInteger(handles.at(-1)));
    assert.equal(store.take(handles.at(-1)!), "12345678");
  });

  it("a store of 0 bytes keeps nothing", () => {
    assert.equal(new KeptBodies(0).keep("{}"), undefined);
  });

  it("holds 100,000 Greeting-sized bodies within 32 MiB and gives each back", () => {
    const store = new KeptBodies(32 * 1024 * 1024);
    const body = (i: number) =>
      JSON.stringify({
        apiVersion: "example.com/v1",
        kind: "Greeting",
        metadata: {
          name: `g-${i}`,
          namespace: "coldscale-1",
          uid: crypto.randomUUID(),
          resourceVersion: String(1000 + i),
          generation: 1,
          creationTimestamp: "2026-11-29T16:00:00Z",
        },
        spec: { message: `hello ${i}` },
      });
    const kept = Array.from({ length: 100_000 }, (_, i) => body(i)).map((json) => [json, store.keep(json)] as const);
    assert.ok(kept.every(([, h]) => h !== undefined));
    assert.ok(store.bytes <= 32 * 1024 * 1024);
    for (const [json, h] of kept) assert.equal(store.take(h!), json);
    assert.equal(store.bytes, 0);
  });
});
