// Children through the in-memory API server: observed children, skipping what already matches,
// pruning, and never applying onto an object this parent does not control.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { z } from "zod";
import { defineOperator, type DesiredObject, type ObservedObject, type OwnedKind } from "../../core/operator.ts";
import { createFakeKube, reconcileWithRuntime } from "../testing/index.ts";
import type { KubeObject } from "./kube-api.ts";

type Spec = { names: string[]; namespace?: string | undefined; kind?: string | undefined };
const cm = (name: string, namespace?: string): DesiredObject => ({
  apiVersion: "v1",
  kind: "ConfigMap",
  metadata: { name, ...(namespace ? { namespace } : {}) },
  data: { name },
});

function lister(owns: Partial<OwnedKind> = {}) {
  return defineOperator<Spec>({
    resource: { group: "example.com", version: "v1", plural: "listers", kind: "Lister" },
    spec: z.object({ names: z.array(z.string()), namespace: z.string().optional(), kind: z.string().optional() }),
    owns: [{ group: "", version: "v1", kind: "ConfigMap", ...owns }],
    reconcile: (o) => ({ children: o.spec.names.map((n) => ({ ...cm(n, o.spec.namespace), ...(o.spec.kind ? { kind: o.spec.kind } : {}) })) }),
  });
}
const obj = (names: string[], extra: Partial<Spec> = {}) => ({ metadata: { name: "l" }, spec: { names, ...extra } });
const ready = (o: KubeObject | undefined) =>
  (o?.status as { conditions?: Array<{ type: string; status: string; reason: string; message: string }> } | undefined)?.conditions?.find(
    (c) => c.type === "Ready",
  );
const names = (objects: KubeObject[]) => objects.map((o) => o.metadata.name).sort();
const cms = { group: "", version: "v1", plural: "configmaps", namespace: "default" };

describe("children", () => {
  it("a steady reconcile reads and writes nothing: the event carries the object and its children's keys", async () => {
    const op = lister();
    const first = await reconcileWithRuntime(op, obj(["a", "b"]));
    assert.deepEqual(names(first.children), ["a", "b"]);
    const before = first.kube.objects({ kind: "ConfigMap" }).map((o) => o.metadata.resourceVersion);
    const steady = await reconcileWithRuntime(op, obj(["a", "b"]), { kube: first.kube });
    assert.deepEqual(
      steady.kube.objects({ kind: "ConfigMap" }).map((o) => o.metadata.resourceVersion),
      before,
    );
    assert.equal(steady.outcome.apiCalls, 0);
    console.log(`# steady reconcile, 2 children of one kind: ${steady.outcome.apiCalls} API calls (first creation ${first.outcome.apiCalls})`);
  });

  it("re-applies a child someone changed, and one whose desired fields changed", async () => {
    const op = lister();
    const first = await reconcileWithRuntime(op, obj(["a"]));
    await first.kube.mergePatch({ ...cms, name: "a" }, { data: { name: "tampered" } });
    await reconcileWithRuntime(op, obj(["a"]), { kube: first.kube });
    assert.deepEqual((await first.kube.get({ ...cms, name: "a" }))?.data, { name: "a" });
  });

  it("prunes a child it no longer returns, and nothing it did not create", async () => {
    const op = lister();
    const kube = createFakeKube();
    kube.put(
      { ...cms, name: "bystander" },
      { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "bystander", labels: { "crdfn.io/parent-uid": "forged" } } },
    );
    const first = await reconcileWithRuntime(op, obj(["a", "b"]), { kube });
    // Someone copies our label onto an unrelated object: the missing owner reference protects it.
    await kube.mergePatch({ ...cms, name: "bystander" }, { metadata: { labels: { "crdfn.io/parent-uid": first.object?.metadata.uid } } });
    const pruned = await reconcileWithRuntime(op, obj(["a"]), { kube });
    assert.deepEqual(names(pruned.children), ["a"]);
    assert.ok(await kube.get({ ...cms, name: "bystander" }), "an object it did not create stays");
  });

  it("prune: false keeps a dropped child", async () => {
    const op = lister({ prune: false });
    const first = await reconcileWithRuntime(op, obj(["a", "b"]));
    const next = await reconcileWithRuntime(op, obj(["a"]), { kube: first.kube });
    assert.deepEqual(names(next.children), ["a", "b"]);
  });

  it("passes observed children to reconcile, typed and keyed by name, and status may use them", async () => {
    const op = defineOperator<{ replicas: number }>({
      resource: { group: "example.com", version: "v1", plural: "apps", kind: "App" },
      spec: z.object({ replicas: z.number() }),
      owns: [{ group: "apps", version: "v1", kind: "Deployment", observe: true }],
      reconcile: (o, ctx) => {
        const current = ctx.children.of<ObservedObject & { status?: { readyReplicas?: number } }>("Deployment")[o.metadata.name];
        return {
          children: [{ apiVersion: "apps/v1", kind: "Deployment", metadata: { name: o.metadata.name }, spec: { replicas: o.spec.replicas } }],
          status: { readyReplicas: current?.status?.readyReplicas ?? 0 },
        };
      },
    });
    const first = await reconcileWithRuntime(op, { metadata: { name: "web" }, spec: { replicas: 2 } });
    assert.equal((first.object?.status as { readyReplicas: number }).readyReplicas, 0);
    first.kube.setStatus({ group: "apps", version: "v1", plural: "deployments", namespace: "default", name: "web" }, { readyReplicas: 2 });
    const next = await reconcileWithRuntime(op, { metadata: { name: "web" }, spec: { replicas: 2 } }, { kube: first.kube });
    assert.equal((next.object?.status as { readyReplicas: number }).readyReplicas, 2);
    assert.equal(next.outcome.apiCalls, 2, "the Deployment read by name, the status write; the Deployment is not re-applied");
  });
});

describe("children: ownership", () => {
  it("never applies onto an existing object it does not control: ChildConflict names it", async () => {
    const kube = createFakeKube();
    kube.put({ ...cms, name: "victim" }, { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "victim" }, data: { precious: "yes" } });
    const run = await reconcileWithRuntime(lister(), obj(["victim", "fine"]), { kube });
    assert.equal(run.outcome.result, "permanent");
    assert.equal(ready(run.object)?.reason, "ChildConflict");
    assert.match(
      ready(run.object)?.message ?? "",
      /ConfigMap default\/victim: .*may change or delete configmaps victim only if that Lister already controls it/,
    );
    const victim = await kube.get({ ...cms, name: "victim" });
    assert.deepEqual([victim?.data, victim?.metadata.ownerReferences], [{ precious: "yes" }, undefined]);
    assert.equal(await kube.get({ ...cms, name: "fine" }), undefined, "nothing was written");
    assert.deepEqual(
      run.events.map((e) => e.reason),
      ["ChildConflict"],
    );
  });

  it("adopts an orphan only with adopt: true, and never an object another controller owns", async () => {
    const kube = createFakeKube();
    kube.put({ ...cms, name: "orphan" }, { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "orphan" } });
    const adopted = await reconcileWithRuntime(lister({ adopt: true }), obj(["orphan"]), { kube });
    assert.deepEqual(names(adopted.children), ["orphan"]);
    const other = await reconcileWithRuntime(lister({ adopt: true }), { metadata: { name: "other" }, spec: { names: ["orphan"] } }, { kube });
    assert.equal(ready(other.object)?.reason, "ChildConflict");
    assert.match(ready(other.object)?.message ?? "", /only if that Lister already controls it/);
  });

  it("takes over at once the child of a deleted earlier object of its name, not yet garbage collected; never another's", async () => {
    const kube = createFakeKube();
    const earlier = { apiVersion: "example.com/v1", kind: "Lister", name: "l", uid: "uid-of-a-deleted-l", controller: true, blockOwnerDeletion: true };
    kube.put({ ...cms, name: "a" }, { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "a", ownerReferences: [earlier] }, data: { name: "old" } });
    kube.put(
      { ...cms, name: "b" },
      { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "b", ownerReferences: [{ ...earlier, name: "m", uid: "uid-of-m" }] } },
    );
    kube.put(
      { ...cms, name: "c" },
      { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "c", ownerReferences: [{ ...earlier, apiVersion: "other.example.com/v1" }] } },
    );
    const run = await reconcileWithRuntime(lister(), obj(["a"]), { kube });
    assert.equal(run.outcome.result, "success");
    const a = await kube.get({ ...cms, name: "a" });
    assert.deepEqual(a?.data, { name: "a" });
    assert.deepEqual(
      (a?.metadata.ownerReferences as Array<{ uid: string }>).map((r) => r.uid),
      [run.object?.metadata.uid],
    );
    for (const taken of ["b", "c"]) {
      const refused = await reconcileWithRuntime(lister(), obj([taken]), { kube });
      assert.equal(ready(refused.object)?.reason, "ChildConflict", `${taken}: controlled by another object`);
    }
  });

  it("refuses a child in another namespace and a child of an undeclared kind", async () => {
    const away = await reconcileWithRuntime(lister(), obj(["a"], { namespace: "elsewhere" }));
    assert.deepEqual([away.outcome.result, ready(away.object)?.reason], ["permanent", "ChildInOtherNamespace"]);
    assert.deepEqual(away.children, []);
    assert.equal(away.events.length, 1);
    const undeclared = await reconcileWithRuntime(lister(), obj(["a"], { kind: "Secret" }));
    assert.deepEqual([undeclared.outcome.result, ready(undeclared.object)?.reason], ["permanent", "UndeclaredKind"]);
    assert.match(ready(undeclared.object)?.message ?? "", /Secret \(v1\) is not declared in owns/);
  });
});
