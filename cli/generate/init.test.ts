import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { SetupError } from "../../emulator/errors.ts";
import { packageVersion, packageRoot } from "../../emulator/paths.ts";
import { initProject, nameProblem } from "./init.ts";
import { NODE_ENGINES, projectNames } from "./init-templates.ts";

const main = fileURLToPath(new URL("../main.ts", import.meta.url));
const work = mkdtempSync(join(tmpdir(), "crdfn-init-test-"));
after(() => rmSync(work, { recursive: true, force: true }));
const SCAFFOLD = [
  ".gitignore",
  ".npmrc",
  "README.md",
  "crdfn.deploy.yaml",
  "http.ts",
  "lambda.ts",
  "operator.test.ts",
  "operator.ts",
  "package.json",
  "sample.yaml",
  "serverless.yml",
  "tsconfig.json",
];

// Without NODE_TEST_CONTEXT, which would make a `crdfn test` there report to this test runner instead.
const { NODE_TEST_CONTEXT: _, ...env } = process.env;
function crdfn(args: string[], cwd: string) {
  return spawnSync(process.execPath, ["--conditions=crdfn-source", main, ...args], { cwd, env, encoding: "utf8" });
}

describe("crdfn init", () => {
  it("makes a project named after its folder: kind, plural, package name", () => {
    const made = initProject("my-app", { cwd: work });
    assert.deepEqual(readdirSync(made.dir).sort(), SCAFFOLD);
    const pkg = JSON.parse(readFileSync(join(made.dir, "package.json"), "utf8")) as Record<string, Record<string, string>>;
    assert.equal(pkg.name, "my-app");
    assert.equal(pkg.type, "module");
    assert.equal(pkg.dependencies!.crdfn, `^${packageVersion}`);
    assert.ok(pkg.dependencies!.zod && pkg.dependencies!["@google-cloud/functions-framework"]);
    assert.deepEqual(Object.keys(pkg.devDependencies!).sort(), ["@types/node", "serverless", "serverless-esbuild", "typescript"]);
    assert.equal(pkg.scripts!.test, "crdfn test");
    assert.equal(readFileSync(join(made.dir, ".npmrc"), "utf8"), "engine-strict=true\n");
    assert.match(readFileSync(join(made.dir, "serverless.yml"), "utf8"), /^service: my-app$/m);
    assert.match(readFileSync(join(made.dir, "crdfn.deploy.yaml"), "utf8"), /^project: my-app /m);
    assert.match(readFileSync(join(made.dir, "operator.ts"), "utf8"), /kind: "MyApp",\n/);
    assert.match(readFileSync(join(made.dir, "sample.yaml"), "utf8"), /^kind: MyApp$/m);
    assert.deepEqual(projectNames("my-app"), { name: "my-app", kind: "MyApp", plural: "myapps", variable: "myApp" });
  });

  it("turns a local tarball given to --crdfn into a file: dependency relative to the project, so the two move together", () => {
    writeFileSync(join(work, "crdfn-9.9.9.tgz"), "");
    const made = initProject("tarball", { cwd: work, crdfn: "./crdfn-9.9.9.tgz" });
    const pkg = JSON.parse(readFileSync(join(made.dir, "package.json"), "utf8")) as { dependencies: Record<string, string> };
    assert.equal(pkg.dependencies.crdfn, "file:../crdfn-9.9.9.tgz");
    const nested = initProject("apps/nested", { cwd: work, crdfn: `file:${join(work, "crdfn-9.9.9.tgz")}` });
    const nestedPkg = JSON.parse(readFileSync(join(nested.dir, "package.json"), "utf8")) as { dependencies: Record<string, string> };
    assert.equal(nestedPkg.dependencies.crdfn, "file:../../crdfn-9.9.9.tgz", "an absolute path given is written relative too");
    assert.equal(initProject("ranged", { cwd: work, crdfn: "^2.0.0" }).dir, join(work, "ranged"));
  });

  it("uses an empty existing folder, and refuses a non-empty one", () => {
    mkdirSync(join(work, "empty"));
    initProject("empty", { cwd: work });
    assert.throws(
      () => initProject("empty", { cwd: work }),
      (e) => e instanceof SetupError && /empty already exists and is not empty/.test(e.message),
    );
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

  it("states one Node minimum everywhere: package.json, the bin's check, a new project, the README", () => {
    const root = JSON.parse(readFileSync(join(packageRoot, "package.json"), "utf8")) as { engines: { node: string } };
    assert.equal(NODE_ENGINES, ">=22.18");
    assert.equal(root.engines.node, NODE_ENGINES);
    assert.match(readFileSync(join(packageRoot, "cli", "crdfn.mjs"), "utf8"), /const NODE_MINIMUM = \[22, 18\];/);
    const project = JSON.parse(readFileSync(join(initProject("engines", { cwd: work }).dir, "package.json"), "utf8")) as { engines: { node: string } };
    assert.equal(project.engines.node, NODE_ENGINES);
    const readme = readFileSync(join(packageRoot, "README.md"), "utf8");
    assert.deepEqual([...new Set([...readme.matchAll(/Node ≥ ?(\d+(\.\d+)?)/g)].map((m) => m[1]))], ["22.18"]);
  });

  it("makes a project that tests, and generates its deploy files once what crdfn cannot know is given", () => {
    mkdirSync(join(packageRoot, ".crdfn"), { recursive: true });
    const parent = mkdtempSync(join(packageRoot, ".crdfn", "init-"));
    try {
      const dir = initProject("motd", { cwd: parent }).dir;
      // crdfn "installed": this checkout, as node_modules/crdfn of the project.
      mkdirSync(join(dir, "node_modules"));
      symlinkSync(packageRoot, join(dir, "node_modules", "crdfn"));
      const tested = crdfn(["test"], dir);
      assert.equal(tested.status, 0, tested.stderr);
      assert.match(tested.stdout, /[#ℹ] pass 2\n[#ℹ] fail 0\n/);

      const refused = crdfn(["generate"], dir);
      assert.equal(refused.status, 2, refused.stderr);
      assert.match(
        refused.stderr,
        /^crdfn: crdfn\.deploy\.yaml: set cluster \(--cluster; .*\), bridge\.image \(--bridge-image; .*\), queues\.urlBase \(--queue-url-base; .*\): crdfn cannot know them and writes no placeholder$/m,
      );
      const made = crdfn(
        [
          "generate",
          "--cluster",
          "prod",
          "--bridge-image",
          "registry.example.com/motd/bridge:1",
          "--queue-url-base",
          "https://sqs.eu-west-1.amazonaws.com/123456789012",
        ],
        dir,
      );
      assert.equal(made.status, 0, made.stderr);
      assert.match(made.stdout, /^wrote \d+ files into deploy\//);
      assert.match(readFileSync(join(dir, "deploy", "serverless", "functions.yml"), "utf8"), /^motd:\n {2}handler: lambda\.handler$/m);
      assert.match(readFileSync(join(dir, "deploy", "bridge", "deployment.yaml"), "utf8"), /name: crdfn-bridge-motd$/m);
      // The same project on Cloud Run: its package.json main (http.ts) registers the function.
      const gcp = crdfn(
        [
          "generate",
          "--target",
          "cloudrun",
          "--cluster",
          "prod",
          "--bridge-image",
          "registry.example.com/motd/bridge:1",
          "--gcp-project",
          "motd-prod",
          "--gcp-region",
          "europe-west1",
          "--gke-cluster",
          "prod",
          "--out",
          "deploy-gcp",
        ],
        dir,
      );
      assert.equal(gcp.status, 0, gcp.stderr);
      assert.match(readFileSync(join(dir, "deploy-gcp", "gcp", "main.tf.json"), "utf8"), /"entry_point": "motd"/);

      rmSync(join(dir, "operator.test.ts"));
      writeFileSync(join(dir, "nothing.test.ts"), "export {};\n");
      const none = crdfn(["test"], dir);
      assert.equal(none.status, 1, none.stdout);
      assert.match(none.stderr, /^crdfn: test: no test ran in nothing\.test\.ts: a project's tests must test something$/m);
    } finally {
      rmSync(parent, { recursive: true, force: true });
    }
  });

  it("prints the next commands", () => {
    const r = crdfn(["init", "fresh"], work);
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /^created fresh\/ \(a Fresh operator\): package\.json, /);
    assert.match(r.stdout, /cd fresh\n\s+npm install\n\s+npm test/);
  });
});
