import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { PARENT_GENERATION_ANNOTATION } from "./event.ts";
import { fenceOf, fenceVerdict, isStaleRefusal, mustRaiseFence, STALE_GENERATION_TOKEN } from "./fence.ts";

const child = (generation: string | undefined, uid = "parent-1") => ({
  metadata: {
    ...(generation === undefined ? {} : { annotations: { [PARENT_GENERATION_ANNOTATION]: generation } }),
    ownerReferences: [{ controller: true, uid }],
  },
});

describe("the fence", () => {
  it("reads a child's fence only from a plain number", () => {
    assert.equal(fenceOf(child("12")), 12);
    for (const bad of [undefined, "", "-1", "1e3", " 3", "1234567890123456789"]) assert.equal(fenceOf(child(bad)), undefined, String(bad));
  });

  it("refuses an update that lowers the fence under the same parent, in the words the runtime matches", () => {
    const refused = fenceVerdict("configmaps", "out", child("5"), child("4"));
    assert.equal(refused, `${STALE_GENERATION_TOKEN}: configmaps out was applied from generation 5, not 4`);
    assert.equal(isStaleRefusal({ code: 403, message: `configmaps "out" is forbidden: ValidatingAdmissionPolicy denied request: ${refused}` }), true);
    assert.notEqual(fenceVerdict("configmaps", "out", child("5"), child(undefined)), undefined, "dropping the fence lowers it");
  });

  it("lets through the same or a newer generation, a create, a delete, an unfenced child and a new parent", () => {
    assert.equal(fenceVerdict("configmaps", "out", child("5"), child("5")), undefined);
    assert.equal(fenceVerdict("configmaps", "out", child("5"), child("6")), undefined);
    assert.equal(fenceVerdict("configmaps", "out", undefined, child("1")), undefined);
    assert.equal(fenceVerdict("configmaps", "out", child("5"), undefined), undefined);
    assert.equal(fenceVerdict("configmaps", "out", child(undefined), child("1")), undefined);
    assert.equal(
      fenceVerdict("configmaps", "out", child("9", "earlier-parent"), child("1", "parent-1")),
      undefined,
      "a re-created parent starts at generation 1",
    );
  });

  it("raises the fence of an unchanged child only behind a view newer than the message", () => {
    assert.equal(mustRaiseFence(3, 3, 1), false, "acting on the message's own generation: every message behind is as new");
    assert.equal(mustRaiseFence(3, 7, 7), false, "already fenced at the view");
    assert.equal(mustRaiseFence(3, 7, 5), true);
    assert.equal(mustRaiseFence(3, 7, undefined), true, "an unknown fence is raised");
    assert.equal(mustRaiseFence(3, undefined, undefined), false);
  });
});
