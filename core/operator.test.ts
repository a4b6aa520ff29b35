import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { z } from "zod";
import { defineOperator, pluralOf } from "./operator.ts";

describe("defineOperator", () => {
  const base = {
    resource: { group: "example.com", version: "v1", plural: "widgets", kind: "Widget" },
    spec: z.object({ size: z.number() }),
    reconcile: () => ({}),
  };

  it("fills in scope, singular, owned plurals and the field manager", () => {
    const op = defineOperator({
      ...base,
      owns: [
        { group: "", version: "v1", kind: "ConfigMap" },
        { group: "networking.k8s.io", version: "v1", kind: "Ingress" },
        { group: "", version: "v1", kind: "Policy" },
      ],
    });
    assert.equal(op.resource.scope, "Namespaced");
    assert.equal(op.resource.singular, "widget");
    assert.equal(op.apiVersion, "example.com/v1");
    assert.deepEqual(
      op.owns.map((o) => o.plural),
      ["configmaps", "ingresses", "policies"],
    );
    assert.equal(op.fieldManager, "crdfn");
  });

  it("refuses a finalizer that is not a qualified name", () => {
    assert.throws(() => defineOperator({ ...base, finalizer: "cleanup" }), /qualified name/);
  });

  it("pluralises kinds as Kubernetes guesses them", () => {
    assert.deepEqual(["CronJob", "Status", "Proxy", "Key"].map(pluralOf), ["cronjobs", "statuses", "proxies", "keys"]);
  });
});
