import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { APPLIED_HASH_ANNOTATION, PARENT_GENERATION_ANNOTATION, PARENT_UID_LABEL } from "../core/event.ts";
import type { KubeObject } from "../functions/runtime/kube-api.ts";
import {
  addTally,
  asAnnounced,
  comparisons,
  kindList,
  policyProfile,
  profileLine,
  resultOf,
  writeRequest,
  writesOf,
  type KindResult,
  type Sender,
  type Tally,
  type Target,
} from "./write-cost.ts";

const now = new Date("2026-11-25T12:00:00Z");
const greeting: KubeObject = {
  apiVersion: "example.com/v1",
  kind: "Greeting",
  metadata: { name: "g", namespace: "ns", uid: "u1", resourceVersion: "42", generation: 3, managedFields: [{ manager: "x" }] },
  spec: { message: "hello" },
};
const target = (): Target => ({ object: asAnnounced(greeting), children: new Map() });

describe("bench:writecost's requests", () => {
  it("status PUT sends the whole object as announced (no managedFields), its resourceVersion and crdfn's field manager", () => {
    const r = writeRequest("status PUT", target(), 1, now);
    assert.equal(r.method, "PUT");
    assert.equal(r.path, "/apis/example.com/v1/namespaces/ns/greetings/g/status");
    assert.deepEqual(r.query, { fieldManager: "crdfn" });
    assert.equal(r.contentType, undefined);
    const body = r.body as KubeObject;
    assert.equal(body.metadata.resourceVersion, "42");
    assert.equal(body.metadata.managedFields, undefined);
    assert.deepEqual(body.spec, { message: "hello" });
    const status = body.status as { observedGeneration: number; phase: string; conditions: Array<{ type: string; message: string }>; reconciled: object };
    assert.equal(status.observedGeneration, 3);
    assert.equal(status.phase, "Ready");
    assert.equal(status.conditions.find((c) => c.type === "Ready")?.message, "status PUT, round 1");
    assert.ok(status.reconciled);
  });

  it("the merge patches carry the status alone, with the resourceVersion only in the planned one", () => {
    const plan = writeRequest("status merge PATCH + rv", target(), 1, now);
    const peer = writeRequest("status merge PATCH", target(), 1, now);
    for (const r of [plan, peer]) {
      assert.equal(r.method, "PATCH");
      assert.equal(r.path, "/apis/example.com/v1/namespaces/ns/greetings/g/status");
      assert.equal(r.contentType, "application/merge-patch+json");
    }
    assert.deepEqual(Object.keys(plan.body), ["metadata", "status"]);
    assert.deepEqual(plan.body.metadata, { resourceVersion: "42" });
    assert.deepEqual(Object.keys(peer.body), ["status"]);
  });

  it("a child's create is an apply (crdfn) or a POST (controller-runtime) of the same ConfigMap under another name", () => {
    const apply = writeRequest("child SSA create", target(), 2, now);
    const post = writeRequest("child POST create", target(), 2, now);
    assert.equal(apply.method, "PATCH");
    assert.equal(apply.path, "/api/v1/namespaces/ns/configmaps/g-r2-apply");
    assert.equal(apply.contentType, "application/apply-patch+yaml");
    assert.deepEqual(apply.query, { fieldManager: "crdfn", force: "true" });
    assert.equal(post.method, "POST");
    assert.equal(post.path, "/api/v1/namespaces/ns/configmaps");
    const a = apply.body as KubeObject;
    const p = post.body as KubeObject;
    assert.equal(p.metadata.name, "g-r2-post");
    // The same body but for the name, and the applied hash, which covers the name.
    const unnamed = (o: KubeObject) => ({ ...o, metadata: { ...o.metadata, name: "", annotations: {} } });
    assert.deepEqual(unnamed(p), unnamed(a));
    assert.deepEqual(a.data, { message: "hello" });
    assert.deepEqual(a.metadata.labels, { "example.com/greeting": "g", [PARENT_UID_LABEL]: "u1" });
    assert.deepEqual(a.metadata.ownerReferences, [
      { apiVersion: "example.com/v1", kind: "Greeting", name: "g", uid: "u1", controller: true, blockOwnerDeletion: true },
    ]);
    const annotations = a.metadata.annotations as Record<string, string>;
    assert.equal(annotations[PARENT_GENERATION_ANNOTATION], "3");
    assert.match(annotations[APPLIED_HASH_ANNOTATION] ?? "", /^[0-9a-f]{32}$/);
  });

  it("each sender's children are ConfigMaps of their own, and its status differs from the one before it, so that each sender's write stores", () => {
    assert.equal(writeRequest("child SSA create", target(), 1, now, "function").path, "/api/v1/namespaces/ns/configmaps/g-r1-fn-apply");
    assert.equal(writeRequest("child SSA create", target(), 1, now, "unfenced").path, "/api/v1/namespaces/ns/configmaps/g-r1-un-apply");
    const statusOf = (sender: Sender) => (writeRequest("status PUT", target(), 1, now, sender).body as KubeObject).status;
    assert.notDeepEqual(statusOf("unfenced"), statusOf("admin"), "the unfenced status PUT after the admin's changes the object");
    assert.notDeepEqual(statusOf("function"), statusOf("unfenced"), "the function's status PUT after the unfenced one changes the object");
  });

  it("the unchanged apply repeats the create's body; the changed one changes the data and so the applied hash", () => {
    const create = writeRequest("child SSA create", target(), 1, now).body as KubeObject;
    assert.deepEqual(writeRequest("child SSA unchanged", target(), 1, now).body, create);
    const changed = writeRequest("child SSA changed", target(), 1, now).body as KubeObject;
    assert.equal(changed.metadata.name, create.metadata.name);
    assert.notDeepEqual(changed.data, create.data);
    const hash = (o: KubeObject) => (o.metadata.annotations as Record<string, string>)[APPLIED_HASH_ANNOTATION];
    assert.notEqual(hash(changed), hash(create));
  });
});

describe("bench:writecost's results", () => {
  const result = (kind: KindResult["kind"], api: number, etcd = 1, sender: KindResult["sender"] = "admin"): KindResult => ({
    round: 1,
    kind,
    sender,
    sentBy: "",
    requests: 100,
    failures: 0,
    stored: 100,
    wallSeconds: 2,
    apiServerMsPerRequest: api,
    etcdMsPerRequest: etcd,
    loadAvgStart: [1],
    loadAvgEnd: [1],
  });

  it("sums a kind's chunks into one result per request, from the first chunk's load to the last's", () => {
    const chunk = (requests: number, api: number, load: number): Tally => ({
      requests,
      failures: 0,
      stored: requests,
      wallSeconds: 1,
      apiServerSeconds: api,
      etcdSeconds: api / 10,
      loadAvgStart: [load],
      loadAvgEnd: [load + 1],
    });
    const r = resultOf(
      2,
      { kind: "child SSA create", sender: "function" },
      addTally(addTally(undefined, chunk(100, 0.5, 3)), { ...chunk(300, 1.5, 7), failures: 1, firstFailure: "409" }),
    );
    assert.deepEqual(r, {
      round: 2,
      kind: "child SSA create",
      sender: "function",
      sentBy: "crdfn",
      requests: 400,
      failures: 1,
      stored: 400,
      firstFailure: "409",
      wallSeconds: 2,
      apiServerMsPerRequest: 5,
      etcdMsPerRequest: 0.5,
      loadAvgStart: [3],
      loadAvgEnd: [8],
    });
  });

  it("compares each alternative with what its system sends, over the rounds' mean, and leaves out a comparison whose kinds did not run", () => {
    const lines = comparisons([
      result("status PUT", 4),
      result("status PUT", 6),
      result("status merge PATCH + rv", 4),
      result("status merge PATCH", 6),
      result("child SSA create", 6),
    ]);
    assert.deepEqual(lines, [
      "status, API server / etcd ms per request: status PUT 5 / etcd 1; status merge PATCH + rv 4 (-20 %) / etcd 1; status merge PATCH 6 (+20 %) / etcd 1",
    ]);
  });

  it("adds the function's line when crdfn's kinds also ran as the function, and the identity's and the policy's apart when they ran unfenced too", () => {
    const lines = comparisons([result("status PUT", 5), result("status PUT", 6, 1.5, "function"), result("child POST create", 3, 0.5, "function")]);
    assert.deepEqual(lines, ["as the function against as the admin, API server / etcd ms per request: status PUT 6 against 5 (+1 ms) / etcd 1.5 against 1"]);
    const apart = comparisons([result("status PUT", 5), result("status PUT", 5.25, 1, "unfenced"), result("status PUT", 6, 1.5, "function")]);
    assert.deepEqual(apart, [
      "as the function against as the admin, API server / etcd ms per request: status PUT 6 against 5 (+1 ms) / etcd 1.5 against 1",
      "the identity alone (unfenced against the admin), API server / etcd ms per request: status PUT 5.25 against 5 (+0.25 ms) / etcd 1 against 1",
      "the admission policy alone (as the function against unfenced), API server / etcd ms per request: status PUT 6 against 5.25 (+0.75 ms) / etcd 1.5 against 1",
    ]);
  });

  it("--as-function sends each of crdfn's own kinds unfenced and as the function right after the admin", () => {
    assert.deepEqual(writesOf(["status merge PATCH", "status PUT", "child POST create", "child SSA create"], true), [
      { kind: "status merge PATCH", sender: "admin" },
      { kind: "status PUT", sender: "admin" },
      { kind: "status PUT", sender: "unfenced" },
      { kind: "status PUT", sender: "function" },
      { kind: "child POST create", sender: "admin" },
      { kind: "child SSA create", sender: "admin" },
      { kind: "child SSA create", sender: "unfenced" },
      { kind: "child SSA create", sender: "function" },
    ]);
    assert.deepEqual(writesOf(["status PUT"], false), [{ kind: "status PUT", sender: "admin" }]);
  });

  it("--kinds takes known kinds in the order given, and an apply of an existing child only after its create", () => {
    assert.deepEqual(kindList("status merge PATCH, status PUT"), ["status merge PATCH", "status PUT"]);
    assert.throws(() => kindList("status PATCH"), /unknown kind "status PATCH"/);
    assert.throws(() => kindList("child SSA unchanged,child SSA create"), /"child SSA unchanged" needs "child SSA create" before it/);
  });
});

describe("bench:writecost's profile of the API server", () => {
  it("turns the policy's sampled seconds into ms per request, and says them in one line", () => {
    const summary = {
      file: "p.pb.gz",
      totalSeconds: 27.88,
      seconds: { policy: 5.21, activation: 2.72, matchConditions: 0.93, validations: 1.77, messages: 1.73, auditAnnotations: 0.71 },
    };
    const profile = policyProfile(summary, 7900);
    assert.equal(profile.sampledMsPerRequest, 3.53);
    assert.equal(profile.msPerRequest.policy, 0.66);
    assert.equal(profile.msPerRequest.auditAnnotations, 0.09);
    const tally: Tally = {
      requests: 7900,
      failures: 0,
      stored: 7900,
      wallSeconds: 20,
      apiServerSeconds: 27.9,
      etcdSeconds: 4,
      loadAvgStart: [2],
      loadAvgEnd: [2],
    };
    const r = resultOf(1, { kind: "child SSA create", sender: "function" }, tally);
    assert.equal(profileLine(r), undefined);
    assert.match(
      profileLine({ ...r, apiServerProfile: profile }) ?? "",
      /^child SSA create, as the function: API server sampled 3\.53 ms per request, of which the admission policy 0\.66 \(match conditions 0\.12, validations 0\.22, messages 0\.22, audit annotations 0\.09; building CEL inputs 0\.34 of it\)$/,
    );
  });
});
