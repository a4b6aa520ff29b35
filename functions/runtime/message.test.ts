import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { encodeKeyEvent } from "../../core/event.ts";
import { keyEventOf } from "./message.ts";

const body = encodeKeyEvent({ v: 1, cluster: "c", group: "g", version: "v1", plural: "ps", kind: "P", namespace: "default", name: "n", uid: "u", resourceVersion: "1", generation: 1, type: "ADDED", observedAt: "2026-11-22T00:00:00Z" });

describe("keyEventOf", () => {
  it("parses a message once, however often it is asked", () => {
    const message = { id: "m", body };
    const first = keyEventOf(message);
    assert.equal(first.ok && first.event.name, "n");
    assert.equal(keyEventOf(message), first, "the same result object: not parsed again");
    assert.notEqual(keyEventOf({ id: "m", body }), first, "another message is parsed for itself");
  });
  it("keeps a malformed body's error", () => {
    const message = { id: "m", body: "{not json" };
    const result = keyEventOf(message);
    assert.equal(result.ok, false);
    assert.equal(keyEventOf(message), result);
  });
});
