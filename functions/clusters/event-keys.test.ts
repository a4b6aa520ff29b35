import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { loadEventKeyrings } from "./event-keys.ts";
import type { ClusterRegistry } from "./registry.ts";

const secret = Buffer.alloc(32, 3).toString("base64");
const one: ClusterRegistry = new Map([["prod", { auth: "in-cluster" }]]);
const two: ClusterRegistry = new Map([
  ["a", { auth: "in-cluster" }],
  ["b", { auth: "in-cluster" }],
]);
const errorOf = (f: () => unknown): string => {
  try {
    f();
  } catch (e) {
    return (e as Error).message;
  }
  return "no error";
};

describe("CRDFN_EVENT_KEYS", () => {
  it("one cluster: keys without the cluster's part are its own; two kids while a key rotates", () => {
    const keys = loadEventKeyrings(`old:${secret},new:${secret}`, one);
    assert.deepEqual([...keys.get("prod")!.keys()], ["old", "new"]);
  });
  it("several clusters: each its own keys, and every cluster needs one", () => {
    const keys = loadEventKeyrings(`a/k1:${secret},b/k1:${secret}`, two);
    assert.deepEqual([...keys.keys()], ["a", "b"]);
    assert.equal(
      errorOf(() => loadEventKeyrings(`a/k1:${secret}`, two)),
      'invalid setting CRDFN_EVENT_KEYS: no key for cluster "b"',
    );
    assert.equal(
      errorOf(() => loadEventKeyrings(`a/k1:${secret},b/k1:${secret},c/k1:${secret}`, two)),
      'invalid setting CRDFN_EVENT_KEYS: names cluster "c", which is not in the registry',
    );
    assert.match(
      errorOf(() => loadEventKeyrings(`k1:${secret}`, two)),
      /^invalid setting CRDFN_EVENT_KEYS: key 1 names no cluster/,
    );
  });
  it("missing or bad: one line naming the setting, never the secret", () => {
    assert.match(
      errorOf(() => loadEventKeyrings(undefined, one)),
      /^invalid setting CRDFN_EVENT_KEYS: required: /,
    );
    const short = Buffer.alloc(8, 1).toString("base64");
    const message = errorOf(() => loadEventKeyrings(`k1:${short}`, one));
    assert.match(message, /^invalid setting CRDFN_EVENT_KEYS: key 1 \(cluster "prod"\): the secret of key "k1" has 8 bytes/);
    assert.ok(!message.includes(short));
    assert.equal(message.split("\n").length, 1);
  });
});
