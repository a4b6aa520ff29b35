import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { canonicalJson, sameJson } from "./canonical-json.ts";

describe("canonical JSON", () => {
  it("spells objects with sorted keys and without undefined members", () => {
    assert.equal(canonicalJson({ b: [2, { y: 1, x: null }], a: "s", c: undefined }), '{"a":"s","b":[2,{"x":null,"y":1}]}');
  });

  it("compares JSON regardless of key order", () => {
    assert.ok(sameJson({ a: 1, b: { c: [1, 2], d: undefined } }, { b: { c: [1, 2] }, a: 1 }));
    assert.ok(!sameJson({ a: [1, 2] }, { a: [2, 1] }));
  });
});
