import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { canonicalJson, sameJson } from "./canonical-json.ts";

/** The definition, plainly: what every version of crdfn has signed and fingerprinted with. */
function plainCanonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(plainCanonicalJson).join(",")}]`;
  if (value !== null && typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>).filter(([, v]) => v !== undefined);
    entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${plainCanonicalJson(v)}`).join(",")}}`;
  }
  return JSON.stringify(value);
}

/** A seeded generator (mulberry32), so a failure names a value that can be found again. */
function random(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const ALPHABET = ["a", "Z", "9", '"', "\\", "\n", "\u0001", "\u007f", "é", "\u2028", "😀", "\ud800", "\udc00", ".", "/", "-", " "];

function anyValue(next: () => number, depth: number): unknown {
  const pick = Math.floor(next() * (depth > 3 ? 5 : 8));
  const text = (): string => Array.from({ length: Math.floor(next() * 6) }, () => ALPHABET[Math.floor(next() * ALPHABET.length)]).join("");
  switch (pick) {
    case 0:
      return text();
    case 1:
      return Math.floor(next() * 2000) - 1000 + (next() < 0.3 ? 0.25 : 0);
    case 2:
      return next() < 0.5;
    case 3:
      return null;
    case 4:
      return next() < 0.5 ? String(Math.floor(next() * 20)) : undefined;
    case 5:
      return Array.from({ length: Math.floor(next() * 4) }, () => anyValue(next, depth + 1));
    default: {
      const o: Record<string, unknown> = {};
      // Keys that look like array indices too: V8 enumerates those first, in numeric order.
      for (let i = Math.floor(next() * 5); i > 0; i--) o[next() < 0.3 ? String(Math.floor(next() * 12)) : text()] = anyValue(next, depth + 1);
      return o;
    }
  }
}

describe("canonical JSON", () => {
  it("spells objects with sorted keys and without undefined members", () => {
    assert.equal(canonicalJson({ b: [2, { y: 1, x: null }], a: "s", c: undefined }), '{"a":"s","b":[2,{"x":null,"y":1}]}');
  });

  it("spells every value byte for byte as the plain definition does, escapes and index-like keys included", () => {
    const next = random(20261129);
    for (let i = 0; i < 5000; i++) {
      const value = anyValue(next, 0);
      assert.equal(canonicalJson(value), plainCanonicalJson(value), `value #${i}`);
    }
  });

  it("compares JSON regardless of key order", () => {
    assert.ok(sameJson({ a: 1, b: { c: [1, 2], d: undefined } }, { b: { c: [1, 2] }, a: 1 }));
    assert.ok(!sameJson({ a: [1, 2] }, { a: [2, 1] }));
  });
});
