// Setup errors a newcomer meets before any cluster answers, each driven as a person runs the
// command (its own process, files on disk): one line on stderr, exit 2, and nothing started.
// Those that need an API server (an object not found) are in test/cli-setup-errors.test.ts.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { packageRoot } from "../emulator/paths.ts";

const main = fileURLToPath(new URL("./main.ts", import.meta.url));
mkdirSync(join(packageRoot, ".crdfn"), { recursive: true });
// Inside the checkout, like a user's project with crdfn installed, so `import "crdfn"` resolves.
const root = mkdtempSync(join(packageRoot, ".crdfn", "setup-errors-"));
after(() => rmSync(root, { recursive: true, force: true }));

const operator = (kind: string, spec: string, before = "") => `import { z } from "zod";
import { defineOperator } from "crdfn";
${before}
export default defineOperator({
  resource: { group: "shop.example.com", version: "v1", plural: "${kind.toLowerCase()}s", kind: "${kind}" },
  spec: z.object(${spec}),
  reconcile: () => ({}),
});
`;

/** A project folder of its own (its files: name → text), so each case reads only its own crdfn.deploy.yaml. */
function project(files: Record<string, string>): string {
  const dir = mkdtempSync(join(root, "p-"));
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
  return dir;
}

const files = {
  "widget.ts": operator("Widget", "{ size: z.number() }"),
  // Line 4 throws (the two imports, the table, then the throw).
  "throws.ts": operator(
    "Widget",
    "{ size: z.number() }",
    'const table: Record<string, string> = {};\nif (table.x === undefined) throw new Error("table is empty");',
  ),
  "syntax.ts": 'import { z } from "zod";\nconst size = ;\n',
  "fn.ts": operator("Gadget", "{ callback: z.function() }"),
  // A kubeconfig client-node reads; nothing is listening there, and no case gets that far.
  kubeconfig:
    "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\nusers: [{name: u, user: {token: t}}]\n",
};

function crdfn(cwd: string, args: string[], env: NodeJS.ProcessEnv = {}) {
  const { KUBECONFIG: _k, ...rest } = process.env;
  const r = spawnSync(process.execPath, ["--conditions=crdfn-source", main, ...args], { cwd, encoding: "utf8", env: { ...rest, ...env } });
  return { stdout: r.stdout, stderr: r.stderr, code: r.status };
}

/** Exactly one line on stderr, `crdfn: <line>`, and exit 2. */
function refused(r: { stdout: string; stderr: string; code: number | null }, line: string | RegExp): void {
  const lines = r.stderr.split("\n").filter(Boolean);
  assert.equal(lines.length, 1, `one line on stderr:\n${r.stderr}`);
  if (typeof line === "string") assert.equal(lines[0], `crdfn: ${line}`);
  else assert.match(lines[0]!, line);
  assert.equal(r.code, 2, r.stderr);
}

describe("a missing or unreadable kubeconfig", () => {
  const dir = project(files);
  it("crdfn diff --kubeconfig /nonexistent: the file and the flag, exit 2", () => {
    refused(crdfn(dir, ["diff", "--kubeconfig", "/nonexistent", "--operator", "widget.ts"]), "kubeconfig /nonexistent (from --kubeconfig): no such file");
  });
  it("crdfn replay --kubeconfig /nonexistent: the same line", () => {
    refused(
      crdfn(dir, ["replay", "widget/a", "--kubeconfig", "/nonexistent", "--operator", "widget.ts"]),
      "kubeconfig /nonexistent (from --kubeconfig): no such file",
    );
  });
  it("KUBECONFIG naming a folder: the file and the variable", () => {
    refused(crdfn(dir, ["diff", "--operator", "widget.ts"], { KUBECONFIG: dir }), `kubeconfig ${dir} (from KUBECONFIG): is a folder, not a file`);
  });
  it("a context the kubeconfig does not have: its contexts named", () => {
    refused(
      crdfn(dir, ["diff", "--kubeconfig", "kubeconfig", "--context", "prod", "--operator", "widget.ts"]),
      "--context prod: kubeconfig kubeconfig (from --kubeconfig) has no such context (its contexts: c)",
    );
  });
});

describe("an API server that does not answer", () => {
  const dir = project(files);
  // Port 1 of the kubeconfig above: connection refused at once.
  const line =
    /^crdfn: GET \/apis\/shop\.example\.com\/v1\/\S*widgets\S*: the API server did not answer \(connect ECONNREFUSED 127\.0\.0\.1:1\): is the kubeconfig's server up\?$/;
  it("crdfn diff: one line naming the request and the address, exit 2", () =>
    refused(crdfn(dir, ["diff", "--kubeconfig", "kubeconfig", "--operator", "widget.ts"]), line));
  it("crdfn replay: the same", () => refused(crdfn(dir, ["replay", "widget/a", "--kubeconfig", "kubeconfig", "--operator", "widget.ts"]), line));
});

describe("an unknown key in crdfn.deploy.yaml: the nearest one named, by every command that reads it", () => {
  const dir = project({ ...files, "crdfn.deploy.yaml": "operators:\n  - module: widget.ts\nnamespace: [team-a]\n" });
  const line = 'crdfn.deploy.yaml: (top): Unrecognized key: "namespace" (did you mean namespaces?)';
  it("crdfn dev refuses it before anything starts", () => {
    const r = crdfn(dir, ["dev", "--operator", "widget.ts", "--state-dir", "state"]);
    refused(r, line);
    assert.equal(r.stdout, "");
    assert.equal(existsSync(join(dir, "state")), false, "no control plane started: no state written");
  });
  it("crdfn generate", () => refused(crdfn(dir, ["generate"]), line));
  it("crdfn diff", () => refused(crdfn(dir, ["diff", "--kubeconfig", "kubeconfig"]), line));
  it("crdfn replay", () => refused(crdfn(dir, ["replay", "widget/a", "--kubeconfig", "kubeconfig"]), line));
});

describe("an operator crdfn dev cannot run is refused before any server starts", () => {
  const dir = project(files);
  it("a spec schema with no CRD form (z.function())", () => {
    const r = crdfn(dir, ["dev", "--operator", "fn.ts", "--state-dir", "state"]);
    refused(r, "CRD gadgets.shop.example.com: spec.callback: z.function() has no CRD schema (not JSON)");
    assert.equal(r.stdout, "");
    assert.equal(existsSync(join(dir, "state")), false, "no control plane started: no state written");
  });
  it("a throw at its import: the file and line of the throw", () => {
    const r = crdfn(dir, ["dev", "--operator", "throws.ts", "--state-dir", "state"]);
    refused(r, /^crdfn: throws\.ts: threw while it was imported at throws\.ts:4:\d+: Error: table is empty$/);
    assert.equal(existsSync(join(dir, "state")), false);
  });
  it("a syntax error: the file, line and column, also when named as an argument (crdfn crd, crdfn generate)", () => {
    const line = 'syntax.ts:2:14: Unexpected ";"';
    refused(crdfn(dir, ["dev", "--operator", "syntax.ts", "--state-dir", "state"]), line);
    refused(crdfn(dir, ["crd", "syntax.ts"]), line);
    refused(
      crdfn(dir, [
        "generate",
        "syntax.ts",
        "--project",
        "p",
        "--cluster",
        "c",
        "--bridge-image",
        "r.example.com/b:1",
        "--queue-url-base",
        "https://sqs.eu-west-1.amazonaws.com/123456789012",
      ]),
      line,
    );
  });
  it("a file that is not there is named as given", () => {
    refused(crdfn(dir, ["crd", "nothere.ts"]), "nothere.ts: no such file");
  });
});
