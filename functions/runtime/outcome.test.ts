import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { PermanentError, TemporaryError } from "../../core/errors.ts";
import { ApiError, ApiNotReady, KubeUnreachable } from "../../clients/kube-http.ts";
import { UserCodeThrew } from "./user-code.ts";
import { classify, messageHandled } from "./outcome.ts";
import { fenceVerdict, STALE_GENERATION_TOKEN, staleRefusal } from "../../core/fence.ts";
import { PARENT_GENERATION_ANNOTATION } from "../../core/event.ts";

const child = (generation: number) => ({
  metadata: { annotations: { [PARENT_GENERATION_ANNOTATION]: String(generation) }, ownerReferences: [{ controller: true, uid: "p" }] },
});

describe("classify", () => {
  it("turns every failure into one verdict", () => {
    assert.deepEqual(classify(new ApiError(409, "Conflict", "x")), { kind: "conflict" });
    assert.deepEqual(classify(new ApiError(422, "Invalid", "bad child")), { kind: "permanent", reason: "RejectedByApiServer", message: "bad child" });
    assert.deepEqual(classify(new PermanentError("no", "QuotaExceeded")), { kind: "permanent", reason: "QuotaExceeded", message: "no" });
    assert.deepEqual(classify(new TemporaryError("wait", 2.5)), { kind: "later", delaySeconds: 3, reason: "TemporaryError", message: "wait" });
    assert.deepEqual(classify(new TemporaryError("wait", 1, "NoQuota")), { kind: "later", delaySeconds: 1, reason: "NoQuota", message: "wait" });
    assert.deepEqual(classify(new Error("boom")), { kind: "retry", message: "boom" });
    assert.deepEqual(classify("thrown string"), { kind: "retry", message: "thrown string" });
  });

  it("blames the API server only for what every object would meet alike: unreachable, timing out, shedding load, a refused credential", () => {
    const refused = Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:6443"), { code: "ECONNREFUSED" });
    for (const e of [
      refused,
      new ApiError(503, "ServiceUnavailable", "down"),
      new ApiError(504, "Timeout", "etcd slow"),
      new ApiError(429, "TooManyRequests", "slow down"),
      new ApiError(401, "Unauthorized", "Unauthorized"),
    ])
      assert.equal(classify(e).kind, "unavailable", e.message);
  });

  it("decides by type, never by words: the client's timeout, a hung watch, a reset and a refusal before the server is ready are outages", () => {
    const forbidden = new ApiError(403, "Forbidden", 'greetings "a" is forbidden: User "system:serviceaccount:x:fn" cannot get resource "greetings"');
    for (const e of [
      new KubeUnreachable("timeout", "GET /x: no answer from the API server in 15000 ms"),
      new KubeUnreachable("silent", "GET /x: watch silent for 60000 ms"),
      new KubeUnreachable("reset", "PATCH /x: the API server did not answer (socket hang up)"),
      new ApiNotReady(forbidden, "/readyz answered 500"),
      new ApiNotReady(new ApiError(401, "Unauthorized", "Unauthorized"), "it answered again 800 ms ago"),
    ])
      assert.equal(classify(e).kind, "unavailable", e.message);
    // The same refusal from a ready server is about this kind, shown on the object.
    assert.equal(classify(forbidden).kind, "retry");
    // Words alone prove nothing: a user's own "timed out", or any untyped error saying so.
    assert.equal(classify(new Error("GET /x: timed out after 15000 ms")).kind, "retry");
    assert.equal(classify(new UserCodeThrew(Object.assign(new Error("connect ECONNREFUSED"), { code: "ECONNREFUSED" }), "EffectThrew")).kind, "retry");
  });

  it("shows on the object what is about one object or one kind: a webhook's 500, an RBAC 403, a 404", () => {
    const webhook = new ApiError(500, "InternalError", 'Internal error occurred: failed calling webhook "configmaps.example.com": connection refused');
    const rbac = new ApiError(403, "Forbidden", 'configmaps "x" is forbidden: User "crdfn" cannot patch resource "configmaps"');
    for (const e of [webhook, rbac, new ApiError(404, "NotFound", "gone")]) assert.equal(classify(e).kind, "retry", e.message);
    const policy = new ApiError(403, "Forbidden", "configmaps \"x\" is forbidden: ValidatingAdmissionPolicy 'crdfn-greeting-function' denied request");
    assert.equal(classify(policy).kind, "permanent");
  });

  it("reads our policy's fence refusal as a conflict (re-read, recompute), and nothing else it refuses", () => {
    const stale = new ApiError(
      403,
      "Forbidden",
      `configmaps "w-out" is forbidden: ValidatingAdmissionPolicy 'crdfn-widget-function' with binding 'crdfn-widget-function' denied request: ${staleRefusal("configmaps", "w-out", 7, 3)}`,
    );
    assert.deepEqual(classify(stale), { kind: "conflict" });
    // The testing kit's in-memory API server says it in the same words.
    assert.deepEqual(
      classify(
        new ApiError(
          403,
          "Forbidden",
          `configmaps "w-out" is forbidden: ValidatingAdmissionPolicy denied request: ${fenceVerdict("configmaps", "w-out", child(7), child(3))}`,
        ),
      ),
      { kind: "conflict" },
    );
    assert.equal(classify(new ApiError(422, "Invalid", STALE_GENERATION_TOKEN)).kind, "permanent", "only a 403 of admission");
  });

  it("hands back to the queue only what must be redelivered", () => {
    assert.equal(messageHandled({ result: "permanent", detail: "" }), true);
    assert.equal(messageHandled({ result: "retry-later", delaySeconds: 1, detail: "" }), true);
    assert.equal(messageHandled({ result: "retry", detail: "" }), false);
    assert.equal(messageHandled({ result: "dead-letter", detail: "" }), false);
    assert.equal(messageHandled({ result: "unavailable", detail: "" }), false);
  });
});
