import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { editDistance, nearestKey } from "./did-you-mean.ts";

const known = ["project", "operators[].module", "operators[].handler", "namespaces", "bridge.namespace", "bridge.image", "out", "gcp.project"];

describe("did you mean", () => {
  it("counts edits", () => {
    assert.equal(editDistance("namespace", "namespaces"), 1);
    assert.equal(editDistance("kitten", "sitting"), 3);
    assert.equal(editDistance("", "abc"), 3);
  });
  it("names the nearest key at the same level", () => {
    assert.equal(nearestKey("namespace", "", known), "namespaces");
    assert.equal(nearestKey("imag", "bridge", known), "bridge.image");
    assert.equal(nearestKey("modul", "operators[]", known), "operators[].module");
    assert.equal(nearestKey("Project", "", known), "project");
  });
  it("else the same name at another level, else nothing", () => {
    assert.equal(nearestKey("image", "", known), "bridge.image");
    assert.equal(nearestKey("region", "", known), undefined);
    assert.equal(nearestKey("xyz", "", known), undefined);
  });
});
