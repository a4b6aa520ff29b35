import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { SetupError } from "../emulator/errors.ts";
import { packageVersion } from "../emulator/paths.ts";
import { initProject, nameProblem } from "./init.ts";
import { projectNames } from "./init-templates.ts";

const main = fileURLToPath(new URL("./main.ts", import.meta.url));
const work = mkdtempSync(join(tmpdir(), "crdfn-init-test-"));
after(() => rmSync(work, { recursive: true, force: true }));

function crdfn(args: string[], cwd: string) {
  return spawnSync(process.execPath, ["--conditions=crdfn-source", main, ...args], { cwd, encoding: "utf8" });
}

describe("crdfn init", () => {
  it("makes a project named after its folder: kind, plural, package name", () => {
    const made = initProject("my-app", { cwd: work });
    assert.deepEqual(readdirSync(made.dir).sort(), [".gitignore", "README.md", "operator.test.ts", "operator.ts", "package.json", "sample.yaml", "tsconfig.json"]);
    const pkg = JSON.parse(readFileSync(join(made.dir, "package.json"), "utf8")) as Record<string, Record<string, string>>;
    assert.equal(pkg.name, "my-app");
    assert.equal(pkg.type, "module");
    assert.equal(pkg.dependencies!.crdfn, `^${packageVersion}`);
    assert.ok(pkg.dependencies!.zod);
    assert.equal(pkg.scripts!.test, "node --test");
    assert.match(readFileSync(join(made.dir, "operator.ts"), "utf8"), /kind: "MyApp",\n/);
    assert.match(readFileSync(join(made.dir, "sample.yaml"), "utf8"), /^kind: MyApp$/m);
    assert.deepEqual(projectNames("my-app"), { name: "my-app", kind: "MyApp", plural: "myapps", variable: "myApp" });
  });

  it("turns a local tarball given to --crdfn into an absolute file: dependency", () => {
    writeFileSync(join(work, "crdfn-9.9.9.tgz"), "");
    const made = initProject("tarball", { cwd: work, crdfn: "./crdfn-9.9.9.tgz" });
    const pkg = JSON.parse(readFileSync(join(made.dir, "package.json"), "utf8")) as { dependencies: Record<string, string> };
    assert.equal(pkg.dependencies.crdfn, `file:${join(work, "crdfn-9.9.9.tgz")}`);
    assert.equal(initProject("ranged", { cwd: work, crdfn: "^2.0.0" }).dir, join(work, "ranged"));
  });

  it("uses an empty existing folder, and refuses a non-empty one", () => {
    mkdirSync(join(work, "empty"));
    initProject("empty", { cwd: work });
    assert.throws(() => initProject("empty", { cwd: work }), (e) => e instanceof SetupError && /empty already exists and is not empty/.test(e.message));
  });

  it("refuses names that are not DNS-1123 labels, or that npm cannot install, saying which", () => {
    for (const bad of ["My_App", "1st", "a-", "x".repeat(64), "has.dot"]) assert.match(nameProblem(bad, [])!, /DNS-1123 label/, bad);
    assert.match(nameProblem("zod", ["crdfn", "zod"])!, /depends on its own name/);
    assert.equal(nameProblem("motd", ["crdfn", "zod"]), undefined);
  });

  it("exits 2 with one line, no stack, on a bad name or a non-empty folder", () => {
    for (const [args, says] of [
      [["init", "Bad_Name"], /^crdfn: init: "Bad_Name" is not a valid name: .*DNS-1123 label/],
      [["init", "my-app"], /^crdfn: init: my-app already exists and is not empty/],
    ] as const) {
      const r = crdfn([...args], work);
      assert.equal(r.status, 2, r.stderr);
      assert.match(r.stderr, says);
      assert.equal(r.stderr.trim().split("\n").length, 1, r.stderr);
    }
  });

  it("prints the next commands", () => {
    const r = crdfn(["init", "fresh"], work);
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /^created fresh\/ \(a Fresh operator\): package\.json, /);
    assert.match(r.stdout, /cd fresh\n\s+npm install\n\s+npm test/);
  });
});
