import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { conditionReason, setCondition } from "./conditions.ts";

const t0 = new Date("2026-11-21T10:00:00.123Z");
const t1 = new Date("2026-11-21T11:00:00Z");

describe("conditions", () => {
  it("keep their transition time while the status holds, and move it when it flips", () => {
    const first = setCondition([], { type: "Ready", status: "True", reason: "Reconciled", message: "" }, t0);
    assert.equal(first[0]?.lastTransitionTime, "2026-11-21T10:00:00Z");
    const same = setCondition(first, { type: "Ready", status: "True", reason: "Reconciled", message: "again" }, t1);
    assert.equal(same[0]?.lastTransitionTime, "2026-11-21T10:00:00Z");
    assert.equal(same[0]?.message, "again");
    const flipped = setCondition(same, { type: "Ready", status: "False", reason: "InvalidSpec", message: "bad" }, t1);
    assert.equal(flipped[0]?.lastTransitionTime, "2026-11-21T11:00:00Z");
    assert.equal(flipped.length, 1);
  });

  it("coerce reasons into the CamelCase word the API server accepts", () => {
    assert.equal(conditionReason("InvalidSpec"), "InvalidSpec");
    assert.equal(conditionReason("not ready yet!"), "notreadyyet");
    assert.equal(conditionReason("42"), "Unknown");
  });
});
