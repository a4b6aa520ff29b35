import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { z } from "zod";
import { defineOperator } from "../../core/operator.ts";
import { reconcileContext } from "./context.ts";
import { testObject, TestObjectSpecError } from "./object.ts";

const motd = defineOperator({
  resource: { group: "demo.example.com", version: "v1", plural: "motds", kind: "Motd" },
  spec: z.object({
    lines: z.array(z.string().min(1)).min(1),
    audience: z.enum(["everyone", "admins"]).default("everyone"),
  }),
  reconcile: (m) => ({ status: { lines: m.spec.lines.length, audience: m.spec.audience } }),
});

const node = defineOperator({
  resource: { group: "demo.example.com", version: "v1", plural: "nodeconfigs", kind: "NodeConfig", scope: "Cluster" },
  spec: z.object({ size: z.number().int() }),
  reconcile: () => ({}),
});

describe("testObject", () => {
  it("takes the spec as a manifest writes it and gives reconcile the parsed, defaulted one", () => {
    const object = testObject(motd, { name: "welcome", spec: { lines: ["hi"] } });
    // Typed from the schema's output: `audience` is no longer optional.
    const audience: "everyone" | "admins" = object.spec.audience;
    assert.equal(audience, "everyone");
    assert.deepEqual(motd.reconcile(object, reconcileContext(motd)).status, { lines: 1, audience: "everyone" });
  });

  it("fills the metadata the runtime would have, and the resource's apiVersion and kind", () => {
    const object = testObject(motd, { name: "welcome", spec: { lines: ["hi"] } });
    assert.equal(object.apiVersion, "demo.example.com/v1");
    assert.equal(object.kind, "Motd");
    assert.equal(object.metadata.namespace, "default");
    assert.equal(object.metadata.generation, 1);
    assert.equal(object.metadata.resourceVersion, "1");
    assert.ok(object.metadata.uid.length > 0);
    assert.equal(object.status, undefined);
  });

  it("keeps what the test sets: namespace, generation, labels, finalizers, deletion, status", () => {
    const object = testObject(motd, {
      name: "welcome",
      namespace: "team-a",
      spec: { lines: ["hi"], audience: "admins" },
      generation: 4,
      labels: { app: "x" },
      finalizers: ["demo.example.com/cleanup"],
      deletionTimestamp: "2026-01-01T00:00:00Z",
      status: { observedGeneration: 3 },
    });
    assert.equal(object.metadata.namespace, "team-a");
    assert.equal(object.metadata.generation, 4);
    assert.deepEqual(object.metadata.labels, { app: "x" });
    assert.deepEqual(object.metadata.finalizers, ["demo.example.com/cleanup"]);
    assert.equal(object.metadata.deletionTimestamp, "2026-01-01T00:00:00Z");
    assert.deepEqual(object.status, { observedGeneration: 3 });
    assert.equal(object.spec.audience, "admins");
  });

  it("gives a cluster-scoped object no namespace", () => {
    assert.equal(testObject(node, { name: "n1", spec: { size: 2 } }).metadata.namespace, undefined);
  });

  it("refuses a spec the schema rejects, naming each path", () => {
    assert.throws(
      () => testObject(motd, { name: "bad", spec: { lines: [""] } }),
      (e: unknown) => e instanceof TestObjectSpecError && /Motd bad: spec\.lines\.0: /.test(e.message),
    );
  });

  it("is typed from the schema's input: a wrong field does not compile", () => {
    // @ts-expect-error audience must be one of the enum's values
    assert.throws(() => testObject(motd, { name: "x", spec: { lines: ["a"], audience: "nobody" } }), TestObjectSpecError);
    // @ts-expect-error lines is required
    assert.throws(() => testObject(motd, { name: "x", spec: {} }), TestObjectSpecError);
  });
});
