import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { SetupError } from "./errors.ts";
import { deployLinters, pinnedDeployLinters } from "./deploy-linters.ts";

describe("deploy linters (cfn-lint, checkov)", () => {
  it("reads the pinned versions of the three tools from infra/deploy-linters/requirements.txt", () => {
    const pins = pinnedDeployLinters();
    assert.deepEqual(Object.keys(pins).sort(), ["cfn-lint", "cfn-lint-serverless", "checkov"]);
    for (const v of Object.values(pins)) assert.match(v, /^\d+\.\d+\.\d+$/);
  });

  it("without python3 stops with one line naming it, and leaves no venv behind", async () => {
    const cache = mkdtempSync(join(tmpdir(), "crdfn-linters-"));
    try {
      const lines: string[] = [];
      const err = await deployLinters({ env: { CRDFN_CACHE_DIR: cache, PATH: join(cache, "no-bin") }, log: (l) => lines.push(l) }).catch((e: unknown) => e);
      assert.ok(err instanceof SetupError, String(err));
      assert.match(err.message, /^python3 is not installed, and it is needed once to install cfn-lint and checkov \(PyPI\)/);
      assert.doesNotMatch(err.message, /\n/);
      assert.deepEqual(lines, []);
      assert.deepEqual(readdirSync(join(cache, "deploy-linters")), [], "no venv and no lock left");
    } finally {
      rmSync(cache, { recursive: true, force: true });
    }
  });
});
