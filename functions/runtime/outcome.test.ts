import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { PermanentError, TemporaryError } from "../../core/errors.ts";
import { ApiError } from "../../clients/kube-http.ts";
import { classify, messageHandled } from "./outcome.ts";

describe("classify", () => {
  it("turns every failure into one verdict", () => {
    assert.deepEqual(classify(new ApiError(409, "Conflict", "x")), { kind: "conflict" });
    assert.deepEqual(classify(new ApiError(422, "Invalid", "bad child")), { kind: "permanent", reason: "RejectedByApiServer", message: "bad child" });
    assert.deepEqual(classify(new PermanentError("no", "QuotaExceeded")), { kind: "permanent", reason: "QuotaExceeded", message: "no" });
    assert.deepEqual(classify(new TemporaryError("wait", 2.5)), { kind: "later", delaySeconds: 3, message: "wait" });
    assert.deepEqual(classify(new ApiError(503, "ServiceUnavailable", "down")), { kind: "retry", message: "down" });
    assert.deepEqual(classify("thrown string"), { kind: "retry", message: "thrown string" });
  });

  it("hands back to the queue only what must be redelivered", () => {
    assert.equal(messageHandled({ result: "permanent", detail: "" }), true);
    assert.equal(messageHandled({ result: "retry-later", delaySeconds: 1, detail: "" }), true);
    assert.equal(messageHandled({ result: "retry", detail: "" }), false);
    assert.equal(messageHandled({ result: "dead-letter", detail: "" }), false);
  });
});
