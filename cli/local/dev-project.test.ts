import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { devProject, projectFromPackageName } from "./dev-project.ts";

const folder = (files: Record<string, string>): string => {
  const dir = mkdtempSync(join(tmpdir(), "crdfn-dev-project-"));
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
  return dir;
};

test("the dev project is --project, else crdfn.deploy.yaml's project, else package.json's name, else dev", (t) => {
  const both = folder({ "crdfn.deploy.yaml": "project: shop\n", "package.json": '{"name":"shop-operators"}' });
  const pkg = folder({ "package.json": '{"name":"@acme/Motd_Operator"}' });
  const none = folder({});
  t.after(() => [both, pkg, none].forEach((d) => rmSync(d, { recursive: true, force: true })));
  assert.deepEqual(devProject(both, "other"), { project: "other", from: "--project" });
  assert.deepEqual(devProject(both), { project: "shop", from: "crdfn.deploy.yaml" });
  assert.deepEqual(devProject(pkg), { project: "motd-operator", from: "package.json" });
  assert.deepEqual(devProject(none), { project: "dev", from: "default" });
});

test("a project name that cannot name Kubernetes objects is one line naming where it came from", (t) => {
  const bad = folder({ "crdfn.deploy.yaml": "project: Shop_1\n" });
  t.after(() => rmSync(bad, { recursive: true, force: true }));
  assert.throws(() => devProject(bad), /^SetupError: crdfn\.deploy\.yaml: project Shop_1: must be a lower-case DNS label/);
  assert.throws(() => devProject(bad, "-x"), /--project -x: must be a lower-case DNS label/);
});

test("a package name becomes a DNS label, or nothing", () => {
  assert.equal(projectFromPackageName("crdfn"), "crdfn");
  assert.equal(projectFromPackageName("@scope/a.b"), "a-b");
  assert.equal(projectFromPackageName("___"), undefined);
});
