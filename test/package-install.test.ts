// crdfn as a user gets it: `npm pack`, installed into a fresh project outside this repository
// (nothing in it resolves back here), `crdfn init`, the new project's own unit test, its CRD,
// and `crdfn dev` reconciling its sample against the emulator; then the same install under
// Node 22 for the library, the Lambda handler and the CLI. Node 24 and Node 22 come from the
// npm packages node@24 / node@22, installed once into a cached folder under the temp dir.
import assert from "node:assert/strict";
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, statSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { delimiter, dirname, join, sep } from "node:path";
import { after, before, describe, it } from "node:test";
import { packageRoot } from "../emulator/paths.ts";

const repoRoots = [packageRoot, realpathSync(join(packageRoot, "node_modules"))].map((p) => realpathSync(p));
const inRepo = (path: string): boolean => repoRoots.some((root) => path === root || path.startsWith(root + sep));

/** The environment a user's shell would have: this Node first, nothing of this checkout's npm run. */
function userEnv(nodeBin: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    // NODE_TEST_CONTEXT would make the project's `node --test` report to this test runner instead.
    if (/^npm_/i.test(k) || k === "NODE_OPTIONS" || k === "NODE_TEST_CONTEXT" || k === "INIT_CWD") continue;
    env[k] = v;
  }
  const path = (process.env.PATH ?? "").split(delimiter).filter((p) => p !== "" && !inRepo(existsSync(p) ? realpathSync(p) : p));
  env.PATH = [dirname(nodeBin), ...path].join(delimiter);
  return env;
}

function run(cmd: string, args: string[], cwd: string, env: NodeJS.ProcessEnv): string {
  const r = spawnSync(cmd, args, { cwd, env, encoding: "utf8", maxBuffer: 64 << 20 });
  assert.equal(r.status, 0, `${cmd} ${args.join(" ")} in ${cwd} exited ${r.status ?? r.signal}:\n${r.stdout}\n${r.stderr}`);
  return r.stdout;
}

/** The npm package node@<major>, installed once into <tmp>/crdfn-node<major>; its binary. */
function cachedNode(major: number): string {
  const dir = join(tmpdir(), `crdfn-node${major}`);
  const bin = join(dir, "node_modules", "node", "bin", "node");
  if (!existsSync(bin)) {
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, "package.json"), JSON.stringify({ name: `node${major}`, private: true }));
    run("npm", ["install", "--no-audit", "--no-fund", `node@${major}`], dir, userEnv(process.execPath));
  }
  return bin;
}

/** Every symbolic link under dir, and where it really points. */
function symlinks(dir: string): Array<[string, string]> {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((d) => d.isSymbolicLink())
    .map((d) => {
      const link = join(d.parentPath, d.name);
      return [link, existsSync(link) ? realpathSync(link) : link];
    });
}

const duKiB = (path: string): number => Number(spawnSync("du", ["-sk", path], { encoding: "utf8" }).stdout.split("\t")[0]);
const mib = (bytes: number): string => `${(bytes / 2 ** 20).toFixed(1)} MiB`;

describe("crdfn installed from its tarball into a project outside the repository", { timeout: 20 * 60_000 }, () => {
  let work: string;
  let tarball: string;
  let host: string;
  let project: string;
  let env24: NodeJS.ProcessEnv;
  let dev: ChildProcess | undefined;
  const phases: Record<string, number> = {};
  const timed = <T>(phase: string, f: () => T): T => {
    const t0 = Date.now();
    try {
      return f();
    } finally {
      phases[phase] = Date.now() - t0;
    }
  };

  before(() => {
    work = mkdtempSync(join(realpathSync(tmpdir()), "crdfn-install-"));
    assert.ok(!inRepo(work), `${work} must be outside the repository`);
    env24 = userEnv(cachedNode(24));
  });
  after(() => {
    // Only if a failed assertion left it running.
    if (dev?.pid && dev.exitCode === null && dev.signalCode === null) process.kill(-dev.pid, "SIGKILL");
    rmSync(work, { recursive: true, force: true });
  });

  it("packs (npm pack builds dist/ first)", (t) => {
    const packed = JSON.parse(run("npm", ["pack", "--json", "--pack-destination", work], packageRoot, env24)) as Array<{ filename: string; size: number; unpackedSize: number; files: Array<{ path: string }> }>;
    tarball = join(work, packed[0]!.filename);
    const paths = packed[0]!.files.map((f) => f.path);
    assert.ok(paths.includes("dist/cli/main.js") && paths.includes("dist/functions/testing/index.d.ts"), "built CLI and declarations are packed");
    assert.ok(!paths.some((p) => p.endsWith(".test.js") || (p.endsWith(".ts") && !p.endsWith(".d.ts"))), "no tests, no TypeScript sources");
    t.diagnostic(`tarball ${mib(statSync(tarball).size)} (${packed[0]!.files.length} files, ${mib(packed[0]!.unpackedSize)} unpacked)`);
  });

  it("installs into a fresh project and `npx crdfn init demo` makes an operator project", () => {
    host = join(work, "host");
    mkdirSync(host);
    writeFileSync(join(host, "package.json"), JSON.stringify({ name: "host", private: true }));
    run("npm", ["install", "--no-audit", "--no-fund", tarball], host, env24);
    const out = timed("crdfn init", () => run("npx", ["crdfn", "init", "demo", "--crdfn", tarball], host, env24));
    assert.match(out, /^created demo\/ \(a Demo operator\)/);
    project = join(host, "demo");
    assert.deepEqual(readdirSync(project).sort(), [".gitignore", "README.md", "operator.test.ts", "operator.ts", "package.json", "sample.yaml", "tsconfig.json"]);
    timed("npm install", () => run("npm", ["install", "--no-audit", "--no-fund"], project, env24));
  });

  it("resolves nothing back into the repository", () => {
    for (const [link, target] of [...symlinks(host), ...symlinks(project)]) assert.ok(!inRepo(target), `${link} → ${target}`);
    for (const file of [join(project, "package.json"), join(project, "package-lock.json"), join(host, "package-lock.json")]) {
      const text = readFileSync(file, "utf8");
      for (const root of repoRoots) assert.ok(!text.includes(root), `${file} names ${root}`);
    }
    const crdfnEntry = realpathSync(createRequire(join(project, "package.json")).resolve("crdfn/package.json"));
    assert.equal(crdfnEntry, join(project, "node_modules", "crdfn", "package.json"));
  });

  it("passes the new project's reconcile unit test (npm test) and type check", () => {
    assert.match(run("npm", ["test"], project, env24), /[#ℹ] pass 2\n[#ℹ] fail 0\n/);
    run("npm", ["run", "typecheck"], project, env24);
  });

  it("prints the project's CRD (npx crdfn crd operator.ts)", () => {
    const crd = run("npx", ["crdfn", "crd", "operator.ts"], project, env24);
    assert.match(crd, /^kind: CustomResourceDefinition$/m);
    assert.match(crd, /name: demos\.demo\.example\.com/);
  });

  it("reconciles its sample in the emulator (npx crdfn dev), and stops cleanly on Ctrl-C", async (t) => {
    const t0 = Date.now();
    // Its own process group, as a shell's foreground job: Ctrl-C reaches npx and crdfn alike.
    const child = spawn("npx", ["crdfn", "dev", "--operator", "operator.ts", "--apply", "sample.yaml"], { cwd: project, env: env24, detached: true, stdio: ["ignore", "pipe", "pipe"] });
    dev = child;
    let out = "";
    child.stdout.setEncoding("utf8").on("data", (s: string) => (out += s));
    child.stderr.setEncoding("utf8").on("data", (s: string) => (out += s));
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.on("exit", (code, signal) => resolve({ code, signal })));
    const deadline = Date.now() + 240_000;
    while (!/^✔ Demo welcome reconciled in /m.test(out)) {
      assert.ok(Date.now() < deadline && child.exitCode === null, `no reconcile line from crdfn dev:\n${out}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    phases["crdfn dev to first reconcile"] = Date.now() - t0;
    process.kill(-child.pid!, "SIGINT");
    // crdfn stops everything and exits 0; npx then re-raises the Ctrl-C it was sent, as a shell expects.
    const { code, signal } = await exited;
    assert.ok(code === 0 || signal === "SIGINT", `npx crdfn dev ended with ${code ?? signal}:\n${out}`);
    assert.match(out, /^stopping…\nstopped$/m);
    assert.throws(() => process.kill(-child.pid!, 0), { code: "ESRCH" }, "nothing of crdfn dev is left running in its process group");
    const initToReconcile = ["crdfn init", "npm install", "crdfn dev to first reconcile"].reduce((sum, phase) => sum + (phases[phase] ?? 0), 0);
    const installed = duKiB(join(project, "node_modules")) * 1024;
    for (const [phase, ms] of Object.entries(phases)) t.diagnostic(`${phase}: ${(ms / 1000).toFixed(1)} s`);
    t.diagnostic(`crdfn init → first reconcile line (init + npm install + crdfn dev): ${(initToReconcile / 1000).toFixed(1)} s`);
    t.diagnostic(`installed size (du of the new project's node_modules): ${mib(installed)}; crdfn itself ${mib(duKiB(join(project, "node_modules", "crdfn")) * 1024)}`);
  });

  describe("the same install under Node 22", () => {
    let env22: NodeJS.ProcessEnv;
    before(() => {
      env22 = userEnv(cachedNode(22));
      assert.match(run("node", ["--version"], project, env22), /^v22\./);
    });

    it("runs the library: the project's npm test", () => {
      assert.match(run("npm", ["test"], project, env22), /[#ℹ] pass 2\n[#ℹ] fail 0\n/);
    });

    it("runs the Lambda handler: a malformed SQS record comes back in batchItemFailures", () => {
      writeFileSync(
        join(project, "lambda-check.ts"),
        `import { lambdaHandler } from "crdfn/lambda";
import operator from "./operator.ts";
// A bad setting would also fail the whole batch: collect what the handler reports, to tell apart.
const reported: string[] = [];
console.error = (line: string) => void reported.push(String(line));
const handler = lambdaHandler(operator, {
  env: { CRDFN_KUBE_AUTH: "token", CRDFN_KUBE_SERVER: "https://127.0.0.1:9", CRDFN_KUBE_TOKEN: "t", AWS_REGION: "us-east-1", LOG_LEVEL: "silent" },
});
const record = { messageId: "m1", body: "not an event", attributes: { ApproximateReceiveCount: "1" }, messageAttributes: {}, eventSourceARN: "arn:aws:sqs:us-east-1:0:events.fifo" };
const response = await handler({ Records: [record] } as never, {} as never);
console.log(JSON.stringify({ response, reported }));
`,
      );
      const out = run("node", ["lambda-check.ts"], project, env22);
      assert.deepEqual(JSON.parse(out.trim().split("\n").at(-1)!), { response: { batchItemFailures: [{ itemIdentifier: "m1" }] }, reported: [] });
    });

    it("runs the CLI: crdfn --version and crdfn crd", () => {
      const version = (JSON.parse(readFileSync(join(packageRoot, "package.json"), "utf8")) as { version: string }).version;
      assert.equal(run("npx", ["crdfn", "--version"], project, env22).trim(), version);
      assert.match(run("npx", ["crdfn", "crd", "operator.ts"], project, env22), /name: demos\.demo\.example\.com/);
    });
  });
});
