// A zod construct a CRD cannot express stops `crdfn crd` and `crdfn generate` with one line that
// names the CRD, the field, the construct and what to write instead: never a stack trace.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { packageRoot } from "../../emulator/paths.ts";

const main = fileURLToPath(new URL("../main.ts", import.meta.url));
mkdirSync(join(packageRoot, ".crdfn"), { recursive: true });
// Inside the checkout, like a user's project with crdfn installed, so `import "crdfn"` resolves.
const work = mkdtempSync(join(packageRoot, ".crdfn", "crd-test-"));
after(() => rmSync(work, { recursive: true, force: true }));

writeFileSync(
  join(work, "operator.ts"),
  `import { z } from "zod";
import { defineOperator } from "crdfn";

export default defineOperator({
  resource: { group: "shop.example.com", version: "v1", plural: "widgets", kind: "Widget" },
  spec: z.object({ schedule: z.object({ at: z.date() }) }),
  reconcile: () => ({}),
});
`,
);

writeFileSync(
  join(work, "lambda.ts"),
  `import { lambdaHandler } from "crdfn/lambda";\nimport operator from "./operator.ts";\nexport const handler = lambdaHandler(operator);\n`,
);

const crdfn = (args: string[]) => spawnSync(process.execPath, ["--conditions=crdfn-source", main, ...args], { cwd: work, encoding: "utf8" });
const LINE =
  "crdfn: CRD widgets.shop.example.com: spec.schedule.at: z.date() has no CRD schema (a manifest holds text, not a Date); use z.iso.datetime() (format date-time) and convert in reconcile\n";

describe("a spec schema with no CRD equivalent", () => {
  it("crdfn crd prints one line and exits 2", () => {
    const run = crdfn(["crd", "operator.ts"]);
    assert.equal(run.stderr, LINE);
    assert.equal(run.stdout, "");
    assert.equal(run.status, 2);
  });

  it("crdfn generate prints the same line, exits 2 and writes nothing", () => {
    const run = crdfn([
      "generate",
      "operator.ts",
      "--project",
      "shop",
      "--cluster",
      "prod",
      "--namespace",
      "shop",
      "--bridge-image",
      "registry.example.com/crdfn-bridge:1",
      "--queue-url-base",
      "https://sqs.eu-west-1.amazonaws.com/123456789012",
    ]);
    assert.equal(run.stderr, LINE);
    assert.equal(run.status, 2);
    assert.equal(existsSync(join(work, "deploy")), false);
  });
});
