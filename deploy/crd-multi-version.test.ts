import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { z } from "zod";
import { defineOperator, type ResourceVersion } from "../core/operator.ts";
import { crdOf, droppedVersions } from "./crd.ts";

const widget = (version: string, versions?: ResourceVersion[]) =>
  defineOperator({
    resource: { group: "example.com", version, plural: "widgets", kind: "Widget", ...(versions ? { versions } : {}) },
    spec: z.object({ size: z.number() }),
    reconcile: () => ({}),
  });

type Version = { name: string; served: boolean; storage: boolean; deprecated?: boolean; deprecationWarning?: string; schema: unknown };
const versions = (crd: Record<string, unknown>) => (crd.spec as { versions: Version[] }).versions;

describe("multi-version CRDs", () => {
  it("declares one served, stored version by default", () => {
    assert.deepEqual(
      versions(crdOf(widget("v1"))).map(({ name, served, storage }) => ({ name, served, storage })),
      [{ name: "v1", served: true, storage: true }],
    );
  });

  it("serves every declared version with the same schema, one of them stored, deprecation included", () => {
    const op = widget("v2", [
      { name: "v1", deprecated: true, deprecationWarning: "example.com/v1 Widget is deprecated; use v2" },
      { name: "v2", storage: true },
    ]);
    const [v1, v2] = versions(crdOf(op));
    const { name, served, storage, deprecated, deprecationWarning } = v1!;
    assert.deepEqual(
      { name, served, storage, deprecated, deprecationWarning },
      { name: "v1", served: true, storage: false, deprecated: true, deprecationWarning: "example.com/v1 Widget is deprecated; use v2" },
    );
    assert.equal(v2?.storage, true);
    assert.deepEqual(v1?.schema, v2?.schema);
    assert.equal(op.apiVersion, "example.com/v2");
  });

  it("stores the reconciled version unless another is marked", () => {
    const [v1, v2] = versions(crdOf(widget("v2", [{ name: "v1" }, { name: "v2" }])));
    assert.deepEqual([v1?.storage, v2?.storage], [false, true]);
  });

  it("keeps a stored version the operator dropped, unserved", () => {
    const all = versions(crdOf(widget("v2"), ["v1", "v2"]));
    assert.deepEqual(
      all.map(({ name, served, storage }) => ({ name, served, storage })),
      [
        { name: "v2", served: true, storage: true },
        { name: "v1", served: false, storage: false },
      ],
    );
  });

  it("finds the versions a CRD generated before could store that the operator no longer declares", () => {
    const before = crdOf(widget("v1beta1"));
    assert.deepEqual(droppedVersions(widget("v1"), before), ["v1beta1"]);
    // Declared retired: kept, so nothing is dropped.
    assert.deepEqual(droppedVersions(widget("v1", [{ name: "v1beta1", served: false }, { name: "v1" }]), before), []);
    // A version that was served but never the storage version held no object.
    assert.deepEqual(droppedVersions(widget("v1"), crdOf(widget("v1", [{ name: "v1alpha1" }, { name: "v1" }]))), []);
    // One the earlier CRD kept unserved may still hold objects.
    assert.deepEqual(droppedVersions(widget("v2"), crdOf(widget("v1"), ["v1beta1"])), ["v1", "v1beta1"]);
    assert.deepEqual(droppedVersions(widget("v1"), "not a CRD"), []);
  });

  it("refuses versions the API server would refuse, naming the problem", () => {
    assert.throws(() => widget("v3", [{ name: "v1" }]), /Widget versions: the reconciled version "v3" is not listed \(v1\)/);
    assert.throws(() => widget("v1", [{ name: "v1" }, { name: "v1" }]), /"v1" is listed twice/);
    assert.throws(() => widget("v1", [{ name: "v1", served: false }]), /reconciled version "v1" must be served/);
    assert.throws(
      () =>
        widget("v1", [
          { name: "v1", storage: true },
          { name: "v2", storage: true },
        ]),
      /only one version may be the storage version \(v1, v2\)/,
    );
    const shaped = { name: "v2", schema: {} } as ResourceVersion;
    assert.throws(() => widget("v1", [{ name: "v1" }, shaped]), /needs a conversion webhook/);
  });
});
