import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { z } from "zod";
import { structuralSchema } from "../core/operator-crd.ts";
import { CRD_DIR, crdFiles } from "./crds.ts";
import { operators } from "./operators.ts";

describe("generated CRDs", () => {
  for (const [file, text] of crdFiles(operators)) {
    it(`${CRD_DIR}/${file} matches the zod schema (run \`npm run gen:crds\`)`, () => {
      assert.equal(readFileSync(join(CRD_DIR, file), "utf8"), text);
    });
  }

  it("refuses what a structural schema cannot express", () => {
    const union = z.toJSONSchema(z.object({ a: z.union([z.string(), z.number()]) }), { target: "openapi-3.0", io: "input" });
    assert.throws(() => structuralSchema(union), /spec\.a: the CRD schema cannot express "anyOf"/);
  });
});
