import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { z } from "zod";
import { structuralSchema } from "./operator-crd.ts";

describe("CRD schema generation", () => {
  it("refuses what a structural schema cannot express", () => {
    const union = z.toJSONSchema(z.object({ a: z.union([z.string(), z.number()]) }), { target: "openapi-3.0", io: "input" });
    assert.throws(() => structuralSchema(union), /spec\.a: the CRD schema cannot express "anyOf"/);
  });
});
