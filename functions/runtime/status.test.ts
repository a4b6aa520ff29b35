import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { sameJson } from "../../core/canonical-json.ts";
import { failureStatus, successStatus } from "./status.ts";

const t0 = new Date("2026-11-21T10:00:00Z");
const t1 = new Date("2026-11-21T10:05:00Z");

describe("status", () => {
  it("is identical on a steady-state reconcile, so the runtime skips the write", () => {
    const first = successStatus(undefined, { phase: "Ready" }, 3, t0);
    const again = successStatus(JSON.parse(JSON.stringify(first)) as typeof first, { phase: "Ready" }, 3, t1);
    assert.ok(sameJson(first, again));
    assert.equal(first.observedGeneration, 3);
    assert.deepEqual(
      first.conditions?.map((c) => [c.type, c.status, c.reason, c.observedGeneration]),
      [["Ready", "True", "Reconciled", 3]],
    );
  });

  it("drops user conditions no longer reported and keeps the transition time of those still reported", () => {
    const first = successStatus(
      undefined,
      {
        conditions: [
          { type: "Synced", status: "True", reason: "Done", message: "" },
          { type: "Old", status: "True", reason: "X", message: "" },
        ],
      },
      1,
      t0,
    );
    const next = successStatus(first, { conditions: [{ type: "Synced", status: "True", reason: "Done", message: "" }] }, 1, t1);
    assert.deepEqual(
      next.conditions?.map((c) => [c.type, c.lastTransitionTime]),
      [
        ["Synced", "2026-11-21T10:00:00Z"],
        ["Ready", "2026-11-21T10:00:00Z"],
      ],
    );
  });

  it("records a failure on Ready and keeps the user's fields", () => {
    const ok = successStatus(undefined, { phase: "Ready" }, 1, t0);
    const failed = failureStatus(ok, "InvalidSpec", "message: too long", 2, t1);
    assert.equal(failed.phase, "Ready");
    assert.equal(failed.observedGeneration, 2);
    assert.deepEqual(
      failed.conditions?.map((c) => [c.status, c.reason, c.message, c.lastTransitionTime]),
      [["False", "InvalidSpec", "message: too long", "2026-11-21T10:05:00Z"]],
    );
    assert.ok(sameJson(failed, failureStatus(failed, "InvalidSpec", "message: too long", 2, t1)), "an unchanged failure is not rewritten");
  });
});
