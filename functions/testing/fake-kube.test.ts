import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { ApiError } from "../../clients/kube-http.ts";
import { createFakeKube } from "./fake-kube.ts";

const cms = { group: "", version: "v1", plural: "configmaps", namespace: "default" };
const cm = { ...cms, name: "a" };

describe("createFakeKube", () => {
  it("versions objects: resourceVersion on every write, generation only when the spec changes", async () => {
    const kube = createFakeKube();
    const created = kube.put(cm, { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "a" }, spec: { x: 1 } });
    assert.equal(created.metadata.generation, 1);
    const labelled = await kube.mergePatch(cm, { metadata: { labels: { l: "1" } } });
    assert.equal(labelled.metadata.generation, 1);
    assert.notEqual(labelled.metadata.resourceVersion, created.metadata.resourceVersion);
    const changed = await kube.mergePatch(cm, { spec: { x: 2 } });
    assert.equal(changed.metadata.generation, 2);
    const status = await kube.replaceStatus(cm, { ...changed, status: { ok: true } });
    assert.equal(status.metadata.generation, 2);
    assert.deepEqual(status.status, { ok: true });
  });

  it("refuses a stale resourceVersion or uid with 409, a missing object with 404", async () => {
    const kube = createFakeKube();
    const created = kube.put(cm, { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "a" } });
    await kube.mergePatch(cm, { data: { k: "v" } });
    await assert.rejects(kube.replaceStatus(cm, created), (e: unknown) => e instanceof ApiError && e.code === 409);
    await assert.rejects(
      kube.mergePatch(cm, { metadata: { resourceVersion: created.metadata.resourceVersion } }),
      (e: unknown) => e instanceof ApiError && e.code === 409,
    );
    await assert.rejects(kube.delete(cm, { uid: "someone-else" }), (e: unknown) => e instanceof ApiError && e.code === 409);
    await assert.rejects(kube.replaceStatus({ ...cms, name: "nope" }, created), (e: unknown) => e instanceof ApiError && e.code === 404);
    assert.equal(await kube.get({ ...cms, name: "nope" }), undefined);
  });

  it("apply upserts and drops the fields its manager no longer applies, keeping other managers' fields", async () => {
    const kube = createFakeKube();
    await kube.apply(cm, { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "a" }, data: { one: "1", two: "2" } }, "me");
    await kube.mergePatch(cm, { data: { theirs: "x" } });
    const after = await kube.apply(cm, { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "a" }, data: { one: "1" } }, "me");
    assert.deepEqual(after.data, { one: "1", theirs: "x" });
  });

  it("names objects from generateName, lists by label, and garbage-collects what a deleted object owned", async () => {
    const kube = createFakeKube();
    const parent = kube.put(cm, { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "a" } });
    const e = await kube.create({ group: "events.k8s.io", version: "v1", plural: "events", namespace: "default" }, { metadata: { generateName: "a." } });
    assert.match(e.metadata.name, /^a\../);
    assert.equal(kube.events().length, 1);
    kube.put(
      { ...cms, name: "child" },
      {
        apiVersion: "v1",
        kind: "ConfigMap",
        metadata: { name: "child", labels: { app: "x" }, ownerReferences: [{ uid: parent.metadata.uid, controller: true }] },
      },
    );
    assert.deepEqual(
      (await kube.list(cms, "app=x")).map((o) => o.metadata.name),
      ["child"],
    );
    await kube.delete(cm);
    assert.deepEqual(kube.objects({ kind: "ConfigMap" }), []);
  });

  it("marks an object with finalizers as being deleted and removes it once they are gone", async () => {
    const kube = createFakeKube();
    kube.put(cm, { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "a", finalizers: ["x/y"] } });
    await kube.delete(cm);
    assert.ok((await kube.get(cm))?.metadata.deletionTimestamp);
    await kube.mergePatch(cm, { metadata: { finalizers: [] } });
    assert.equal(await kube.get(cm), undefined);
  });
});
