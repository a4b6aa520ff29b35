// The committed CRDs of the examples are what their zod schemas generate today.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { crdFiles } from "../deploy/crd.ts";
import cronTab from "./crontab/operator.ts";
import greeting from "./greeting/operator.ts";

const CRD_DIR = join(import.meta.dirname, "..", "infra", "generated", "crds");

describe("the examples' generated CRDs", () => {
  for (const [file, text] of crdFiles([greeting, cronTab])) {
    it(`infra/generated/crds/${file} matches the zod schema (run \`npm run gen:crds\`)`, () => {
      assert.equal(readFileSync(join(CRD_DIR, file), "utf8"), text);
    });
  }
});
