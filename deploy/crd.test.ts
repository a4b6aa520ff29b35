import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { z } from "zod";
import { crdFiles, crdOf, printerColumnsOf, statusSchemaOf } from "./crd.ts";
import { defineOperator, type Operator, type PrinterColumn } from "../core/operator.ts";

describe("CRD schema generation", () => {
  it("refuses what a structural schema cannot express, naming the field (every construct: crd-schema.test.ts)", () => {
    const op = defineOperator({
      resource: { group: "example.com", version: "v1", plural: "things", kind: "Thing" },
      spec: z.object({ a: z.union([z.string(), z.number()]) }),
      reconcile: () => ({}),
    });
    assert.throws(() => crdOf(op), { message: /^CRD things\.example\.com: spec\.a: z\.union\(\) of string and number has no CRD schema/ });
  });

  it("quotes what YAML 1.1 (kubectl's YAML) would read as a boolean: a field named n or on", () => {
    const op = defineOperator({
      resource: { group: "example.com", version: "v1", plural: "things", kind: "Thing" },
      spec: z.object({ n: z.string(), on: z.enum(["y", "no"]) }),
      reconcile: () => ({}),
    });
    const text = [...crdFiles([op]).values()][0]!;
    assert.match(text, /\n {16}"n":\n {18}type: string\n/);
    assert.match(text, /\n {16}"on":\n/);
    assert.match(text, /\n {20}- "y"\n {20}- "no"\n/);
  });
});

describe("CRD status schema and columns", () => {
  const base = { resource: { group: "example.com", version: "v1", plural: "things", kind: "Thing" }, spec: z.object({}), reconcile: () => ({}) };
  it("without a status schema, status stays free-form; Ready and Age columns come for free", () => {
    const crd = crdOf(defineOperator(base));
    const version = (crd.spec as { versions: Array<Record<string, unknown>> }).versions[0];
    assert.deepEqual((version?.schema as { openAPIV3Schema: { properties: Record<string, unknown> } }).openAPIV3Schema.properties.status, {
      type: "object",
      "x-kubernetes-preserve-unknown-fields": true,
    });
    assert.deepEqual(
      (version?.additionalPrinterColumns as PrinterColumn[]).map((c) => c.name),
      ["Ready", "Reason", "Attempts", "Next", "Age"],
    );
  });

  it("a zod status schema becomes the status schema, with the runtime's observedGeneration, conditions, nextReconcile and reconciled, and no top-level required", () => {
    const op = defineOperator({ ...base, status: z.object({ replicas: z.number().int().min(0), phase: z.enum(["Ready", "Pending"]) }) });
    const status = statusSchemaOf(op);
    const properties = status.properties as Record<string, Record<string, unknown>>;
    assert.deepEqual(Object.keys(properties).sort(), ["conditions", "nextReconcile", "observedGeneration", "phase", "reconciled", "replicas"]);
    assert.equal(properties.replicas?.type, "integer");
    assert.equal(status.required, undefined);
    assert.equal(status["x-kubernetes-preserve-unknown-fields"], undefined);
  });

  it("puts Ready before a declared Age column", () => {
    const op = defineOperator({
      ...base,
      resource: {
        ...base.resource,
        printerColumns: [
          { name: "Phase", type: "string", jsonPath: ".status.phase" },
          { name: "Age", type: "date", jsonPath: ".metadata.creationTimestamp" },
        ],
      },
    });
    assert.deepEqual(
      printerColumnsOf(op as Operator<unknown>).map((c) => c.name),
      ["Phase", "Ready", "Reason", "Attempts", "Next", "Age"],
    );
  });
});
