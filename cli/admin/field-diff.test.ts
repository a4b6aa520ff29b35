import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { fieldChanges, formatChange, isWithin, leafChanges } from "./field-diff.ts";

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
  it("spells out a value added or removed whole, leaf by leaf, not as one line of JSON", () => {
    const status = { observedGeneration: 1, conditions: [{ type: "Ready", status: "True", reason: "Reconciled", message: "" }] };
    assert.deepEqual(leafChanges(undefined, status).map(formatChange), [
      'conditions[0].message: + ""',
      'conditions[0].reason: + "Reconciled"',
      'conditions[0].status: + "True"',
      'conditions[0].type: + "Ready"',
      "observedGeneration: + 1",
    ]);
    assert.deepEqual(leafChanges({ a: { b: 1 }, keep: 2 }, { keep: 2 }).map(formatChange), ["a.b: - 1"]);
    assert.deepEqual(leafChanges({ a: 1 }, { a: 2 }), fieldChanges({ a: 1 }, { a: 2 }));
  });
  it("tells a field inside another from one beside it", () => {
    assert.ok(isWithin("a.b", "a.b") && isWithin("a.b.c", "a.b") && isWithin("a.b[0]", "a.b") && isWithin("x", ""));
    assert.ok(!isWithin("a.bc", "a.b") && !isWithin("a", "a.b"));
  });
});
