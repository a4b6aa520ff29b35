import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ownChangeOnly, parseKeyEvent, supersede, type KeyEvent } from "./event.ts";

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
  it("only an object's own changes may read its children from the watch cache", () => {
    for (const reason of ["watch", "list", "relist"]) assert.equal(ownChangeOnly(event(reason)), true, reason);
    for (const reason of ["child", "resync", "requeue", "retry", undefined]) assert.equal(ownChangeOnly(event(reason)), false, String(reason));
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
