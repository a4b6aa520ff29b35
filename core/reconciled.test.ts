import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { childMarkOf, childrenDigest, childToken, metadataDigest, reconciledOf, reconciledRecord } from "./reconciled.ts";
import { createHash } from "node:crypto";
import { canonicalJson } from "./canonical-json.ts";
import { digest, fingerprint } from "./object-fingerprint.ts";

const parent = (labels: Record<string, string>, annotations: Record<string, string>, generation = 1) => ({
  metadata: { name: "p", uid: "u", resourceVersion: "9", generation, labels, annotations },
  spec: { a: 1 },
});
const applied = (manager: string, operation = "Apply") => ({
  metadata: {
    name: "c",
    uid: "uid-c",
    resourceVersion: "3",
    annotations: { "crdfn.io/applied-hash": "h1" },
    managedFields: [{ manager, operation, time: "2026-11-25T00:00:00Z" }],
  },
  data: { x: "1" },
});

describe("what the function records it reconciled", () => {
  it("a digest is the first 16 characters of the SHA-256's base64url, as statuses written by earlier versions record it", () => {
    for (const value of [{}, { a: [1, "x"] }, "text", null]) {
      const whole = createHash("sha256").update(canonicalJson(value)).digest("base64url");
      assert.equal(digest(value), whole.slice(0, 16));
    }
  });

  it("the metadata digest changes with a label, an annotation (a resync stamp) or the generation, not with status or the resourceVersion", () => {
    const base = metadataDigest(parent({ a: "1" }, {}));
    assert.equal(
      metadataDigest({ ...parent({ a: "1" }, {}), status: { x: 1 }, metadata: { ...parent({ a: "1" }, {}).metadata, resourceVersion: "10" } }),
      base,
    );
    assert.notEqual(metadataDigest(parent({ a: "2" }, {})), base);
    assert.notEqual(metadataDigest(parent({ a: "1" }, { "crdfn.io/resync": "now" })), base);
    assert.notEqual(metadataDigest(parent({ a: "1" }, {}, 2)), base);
    // No labels and empty labels are the same metadata.
    assert.equal(metadataDigest({ metadata: { generation: 1 } }), metadataDigest({ metadata: { generation: 1, labels: {}, annotations: {} } }));
  });

  it("the children digest ignores order and sees a child gone, added, or rewritten by someone else", () => {
    const a = { uid: "a", token: "h1" };
    const b = { uid: "b", token: "h2" };
    assert.equal(childrenDigest([a, b]), childrenDigest([b, a]));
    assert.notEqual(childrenDigest([a]), childrenDigest([a, b]));
    assert.notEqual(childrenDigest([a, b]), childrenDigest([a, { uid: "b", token: childToken(undefined, "fp") }]));
    assert.equal(childrenDigest([]), childrenDigest([]));
  });

  it("a child's token is its applied hash while the function's apply wrote it last, else its content fingerprint, as the bridge computes it", () => {
    assert.deepEqual(childMarkOf(applied("crdfn"), "crdfn"), { uid: "uid-c", token: "h1" });
    const edited = applied("kubectl", "Update");
    assert.deepEqual(childMarkOf(edited, "crdfn"), { uid: "uid-c", token: childToken(undefined, fingerprint(edited, false)) });
    // An in-memory API server keeps no managedFields: the applied hash stands.
    assert.deepEqual(childMarkOf({ metadata: { uid: "u2", annotations: { "crdfn.io/applied-hash": "h9" } } }, "crdfn"), { uid: "u2", token: "h9" });
  });

  it("round-trips through status; a status without it (an older function) or with a malformed one records nothing", () => {
    const record = reconciledRecord(parent({}, {}), [{ uid: "a", token: "h" }]);
    assert.equal(record.childCount, 1);
    assert.deepEqual(reconciledOf({ observedGeneration: 1, reconciled: record }), record);
    assert.equal(reconciledOf({ observedGeneration: 1 }), undefined);
    assert.equal(reconciledOf({ reconciled: { metadata: 3 } }), undefined);
    assert.equal(reconciledOf(undefined), undefined);
  });
});
