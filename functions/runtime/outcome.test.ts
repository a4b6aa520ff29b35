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
    assert.deepEqual(classify(new ApiError(500, "InternalError", "etcd")), { kind: "unavailable", message: "etcd" });
    assert.deepEqual(classify(new Error("boom")), { kind: "retry", message: "boom" });
    assert.deepEqual(classify("thrown string"), { kind: "retry", message: "thrown string" });
  });

  it("blames the infrastructure, not the object, for outages, throttling and broken credentials", () => {
    const refused = Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:6443"), { code: "ECONNREFUSED" });
    for (const e of [refused, new ApiError(503, "ServiceUnavailable", "down"), new ApiError(429, "TooManyRequests", "slow down"), new ApiError(401, "Unauthorized", "Unauthorized"), new ApiError(403, "Forbidden", "no"), new Error("GET /x: timed out after 15000 ms")])
      assert.equal(classify(e).kind, "unavailable", e.message);
    assert.equal(classify(new ApiError(404, "NotFound", "gone")).kind, "retry");
  });

  it("hands back to the queue only what must be redelivered", () => {
    assert.equal(messageHandled({ result: "permanent", detail: "" }), true);
    assert.equal(messageHandled({ result: "retry-later", delaySeconds: 1, detail: "" }), true);
    assert.equal(messageHandled({ result: "retry", detail: "" }), false);
    assert.equal(messageHandled({ result: "dead-letter", detail: "" }), false);
    assert.equal(messageHandled({ result: "unavailable", detail: "" }), false);
  });
});
