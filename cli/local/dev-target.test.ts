import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { fileURLToPath } from "node:url";

const main = fileURLToPath(new URL("../main.ts", import.meta.url));
const stateDir = mkdtempSync(join(tmpdir(), "crdfn-dev-registry-"));
after(() => rmSync(stateDir, { recursive: true, force: true }));

describe("crdfn dev with a cluster registry in the environment", () => {
  it("stops before starting anything, in one line naming the variable that is set", () => {
    for (const [name, value] of [
      ["CRDFN_CLUSTERS", "{not json"],
      ["CRDFN_CLUSTERS", '{"a":{"auth":"kubeconfig"}}'],
      ["CRDFN_CLUSTERS_FILE", "clusters.yaml"],
    ] as const) {
      const r = spawnSync(process.execPath, ["--conditions=crdfn-source", main, "dev", "--state-dir", stateDir], {
        env: { ...process.env, [name]: value },
        encoding: "utf8",
        timeout: 60_000,
      });
      assert.equal(r.status, 2, r.stderr);
      assert.equal(
        r.stderr,
        `crdfn: ${name} is set, but crdfn dev serves only the cluster it runs against; unset ${name} (a function host serving several clusters takes it)\n`,
      );
      assert.equal(r.stdout, "", "nothing started");
      assert.ok(!existsSync(join(stateDir, "env")), "no environment written");
    }
  });
});
