import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { fieldChanges, formatChange } from "./field-diff.ts";

describe("field-level differences", () => {
  it("names each changed leaf by its path, added and removed ones included", () => {
    const changes = fieldChanges(
      { data: { message: "Hello", keep: "x", gone: "y" }, ports: [{ port: 80 }] },
      { data: { message: "Hi", keep: "x", "a.b": "z" }, ports: [{ port: 8080 }] },
    );
    assert.deepEqual(changes.map(formatChange), ['data["a.b"]: + "z"', 'data.gone: - "y"', 'data.message: "Hello" → "Hi"', "ports[0].port: 80 → 8080"]);
  });
  it("takes a list whose length changed as one value", () => {
    assert.deepEqual(fieldChanges({ a: [1] }, { a: [1, 2] }), [{ path: "a", before: [1], after: [1, 2] }]);
  });
  it("finds nothing between equal values", () => {
    assert.deepEqual(fieldChanges({ a: { b: [1, { c: null }] } }, { a: { b: [1, { c: null }] } }), []);
  });
});
