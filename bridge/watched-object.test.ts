import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { controllerOf, fingerprint, lastContentWriteWasApply, type WatchedObject } from "./watched-object.ts";

const base = (): WatchedObject => ({
  apiVersion: "stable.example.com/v1",
  kind: "CronTab",
  metadata: { name: "a", namespace: "ns", uid: "u1", resourceVersion: "10", generation: 1, labels: { x: "1" }, managedFields: [{ manager: "m" }] },
  spec: { cronSpec: "* * * * *", image: "busybox", replicas: 1 },
  status: { ready: false },
});

describe("fingerprint", () => {
  it("ignores status, managedFields, resourceVersion and key order", () => {
    const a = base();
    const b = base();
    b.metadata.resourceVersion = "11";
    b.metadata.managedFields = [];
    b.status = { ready: true };
    b.spec = { replicas: 1, image: "busybox", cronSpec: "* * * * *" };
    assert.equal(fingerprint(a, false), fingerprint(b, false));
    assert.notEqual(fingerprint(a, true), fingerprint(b, true));
  });

  it("changes with spec, labels, annotations, finalizers, deletion and owners", () => {
    const fp = fingerprint(base(), false);
    const variants: Array<(o: WatchedObject) => void> = [
      (o) => ((o.spec as { replicas: number }).replicas = 2),
      (o) => (o.metadata.labels = { x: "2" }),
      (o) => (o.metadata.annotations = { a: "b" }),
      (o) => (o.metadata.finalizers = ["f"]),
      (o) => (o.metadata.deletionTimestamp = "2026-11-21T00:00:00Z"),
      (o) => (o.metadata.ownerReferences = [{ apiVersion: "v1", kind: "X", name: "p", uid: "p1" }]),
      (o) => (o.data = { k: "v" }),
    ];
    for (const change of variants) {
      const o = base();
      change(o);
      assert.notEqual(fingerprint(o, false), fp, String(change));
    }
  });
});

describe("controllerOf", () => {
  it("finds the controller owner of the parent's group and kind only", () => {
    const o = base();
    o.metadata.ownerReferences = [
      { apiVersion: "stable.example.com/v1", kind: "CronTab", name: "other", uid: "x" },
      { apiVersion: "stable.example.com/v1beta1", kind: "CronTab", name: "p", uid: "p1", controller: true },
    ];
    assert.equal(controllerOf(o, "stable.example.com", "CronTab")?.name, "p");
    assert.equal(controllerOf(o, "batch", "CronTab"), undefined);
  });
});

describe("lastContentWriteWasApply", () => {
  const child = (...entries: Array<{ manager: string; operation: string; time: string; subresource?: string }>) => ({
    metadata: { name: "c", namespace: "ns", uid: "u", resourceVersion: "1", managedFields: entries },
  });

  it("recognises the function's own apply as the newest write", () => {
    const obj = child(
      { manager: "kubectl-edit", operation: "Update", time: "2026-11-21T10:00:00Z" },
      { manager: "crdfn", operation: "Apply", time: "2026-11-21T10:00:05Z" },
    );
    assert.equal(lastContentWriteWasApply(obj, "crdfn"), true);
    assert.equal(lastContentWriteWasApply(obj, "someone-else"), false);
  });

  it("announces drift: someone else wrote last", () => {
    const obj = child(
      { manager: "crdfn", operation: "Apply", time: "2026-11-21T10:00:05Z" },
      { manager: "kubectl-edit", operation: "Update", time: "2026-11-21T10:00:09Z" },
    );
    assert.equal(lastContentWriteWasApply(obj, "crdfn"), false);
  });

  it("announces when the newest second is shared or the write was to a subresource", () => {
    assert.equal(
      lastContentWriteWasApply(
        child(
          { manager: "crdfn", operation: "Apply", time: "2026-11-21T10:00:05Z" },
          { manager: "kubectl-edit", operation: "Update", time: "2026-11-21T10:00:05Z" },
        ),
        "crdfn",
      ),
      false,
    );
    assert.equal(
      lastContentWriteWasApply(child({ manager: "crdfn", operation: "Apply", time: "2026-11-21T10:00:05Z", subresource: "status" }), "crdfn"),
      false,
    );
    assert.equal(lastContentWriteWasApply(child(), "crdfn"), false);
  });

  it("a controller's status write after the apply leaves the content the function's", () => {
    const obj = child(
      { manager: "crdfn", operation: "Apply", time: "2026-11-21T10:00:05Z" },
      { manager: "kube-controller-manager", operation: "Update", time: "2026-11-21T10:00:09Z", subresource: "status" },
    );
    assert.equal(lastContentWriteWasApply(obj, "crdfn"), true);
  });
});
