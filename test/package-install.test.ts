// crdfn as a user gets it: `npm pack`, installed into a fresh project outside this repository
// (nothing in it resolves back here), `crdfn init`, the new project's own unit test, its CRD,
// `crdfn dev` reconciling its sample against the emulator, its deploy files generated and
// packaged by `serverless package` (offline), and the bridge image's build context; then the same
// install under Node 22 for the library, the Lambda handler and the CLI, and under Node 20 the one
// line saying which Node crdfn needs. Node 24 and Node 22 come from the npm packages node@24 /
// node@22, installed once into a cached folder under the temp dir; Node 20 is the machine's
// `node` when that is older than 22.18, else node@20 the same way.
import assert from "node:assert/strict";
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, statSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { basename, delimiter, dirname, join, sep } from "node:path";
import { after, before, describe, it } from "node:test";
import { SERVERLESS_OFFLINE } from "./support/serverless-package.ts";
import { buildOnceInto } from "../emulator/build-once.ts";
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

/**
 * The npm package node@<major>, installed once into <tmp>/crdfn-node<major>; its binary. Suites
 * running side by side share it: the install is serialized and renamed into place (an npm install
 * into a folder another one is filling removes what that one wrote).
 */
async function cachedNode(major: number): Promise<string> {
  const dir = join(tmpdir(), `crdfn-node${major}`);
  const binIn = (root: string) => join(root, "node_modules", "node", "bin", "node");
  await buildOnceInto({
    what: `node@${major}`,
    dir,
    complete: () => existsSync(binIn(dir)),
    staleLockMs: 10 * 60_000,
    pollMs: 1000,
    log: () => {},
    build: (tmp) => {
      writeFileSync(join(tmp, "package.json"), JSON.stringify({ name: `node${major}`, private: true }));
      run("npm", ["install", "--no-audit", "--no-fund", `node@${major}`], tmp, userEnv(process.execPath));
      assert.ok(existsSync(binIn(tmp)), `npm install node@${major} left no ${binIn(tmp)}`);
      return Promise.resolve();
    },
  });
  return binIn(dir);
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

/** A Node older than crdfn's minimum: the machine's own `node` when it is one, else node@20. */
async function oldNode(): Promise<string> {
  const outside = (process.env.PATH ?? "").split(delimiter).filter((p) => p !== "" && !inRepo(existsSync(p) ? realpathSync(p) : p));
  const system = outside.map((dir) => join(dir, "node")).find((bin) => existsSync(bin));
  const version = system ? spawnSync(system, ["--version"], { encoding: "utf8" }).stdout.trim() : "";
  const [major = 99, minor = 0] = version.replace(/^v/, "").split(".").map(Number);
  return system && (major < 22 || (major === 22 && minor < 18)) ? system : await cachedNode(20);
}

const duKiB = (path: string): number => Number(spawnSync("du", ["-sk", path], { encoding: "utf8" }).stdout.split("\t")[0]);
/** The README's install commands (its ```sh run=install block), comments dropped: the test runs these. */
const install = (() => {
  const readme = readFileSync(join(packageRoot, "README.md"), "utf8");
  const block = /```sh run=install\n([\s\S]*?)```/.exec(readme);
  assert.ok(block, "the README has a ```sh run=install block");
  return block[1]!
    .split("\n")
    .map((l) => l.replace(/\s+#.*$/, "").trim())
    .filter(Boolean);
})();
const mib = (bytes: number): string => `${(bytes / 2 ** 20).toFixed(1)} MiB`;

// A safety net, not a bound: npm install and npm pack alone took 19 min with two whole suites
// beside each other on 2 cores (load ~30); 10 min alone at load 9.
describe("crdfn installed from its tarball into a project outside the repository", { timeout: 45 * 60_000 }, () => {
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

  before(async () => {
    work = mkdtempSync(join(realpathSync(tmpdir()), "crdfn-install-"));
    assert.ok(!inRepo(work), `${work} must be outside the repository`);
    env24 = userEnv(await cachedNode(24));
  });
  after(() => {
    // Only if a failed assertion left it running.
    if (dev?.pid && dev.exitCode === null && dev.signalCode === null) process.kill(-dev.pid, "SIGKILL");
    rmSync(work, { recursive: true, force: true });
  });

  it("packs as the README's first command does (npm pack builds dist/ first)", (t) => {
    // (cd crdfn && npm pack): this checkout stands for the reader's folder crdfn beside the
    // project; the tarball goes there, where the README's next command takes it from.
    assert.match(install[0]!, /^\(cd crdfn && npm pack\)/);
    mkdirSync(join(work, "crdfn"));
    const packed = JSON.parse(run("npm", ["pack", "--json", "--pack-destination", join(work, "crdfn")], packageRoot, env24)) as Array<{
      filename: string;
      size: number;
      unpackedSize: number;
      files: Array<{ path: string }>;
    }>;
    tarball = join(work, "crdfn", packed[0]!.filename);
    assert.match(install[1]!, new RegExp(`--package \\./crdfn/${packed[0]!.filename.replace(/\./g, "\\.")} `), "the README names the tarball npm pack writes");
    const paths = packed[0]!.files.map((f) => f.path);
    assert.ok(paths.includes("dist/cli/main.js") && paths.includes("dist/functions/testing/index.d.ts"), "built CLI and declarations are packed");
    assert.ok(!paths.some((p) => p.endsWith(".test.js") || (p.endsWith(".ts") && !p.endsWith(".d.ts"))), "no tests, no TypeScript sources");
    // The bridge image's Dockerfile, and every file it copies from its build context (the package).
    assert.ok(paths.includes("infra/bridge/Dockerfile"), "the bridge's Dockerfile is packed");
    const dockerfile = readFileSync(join(packageRoot, "infra", "bridge", "Dockerfile"), "utf8");
    const copied = [...dockerfile.matchAll(/^COPY (?!--from)(.+) \S+$/gm)].flatMap((m) => m[1]!.trim().split(/\s+/));
    assert.deepEqual(copied, ["dist/bridge.mjs", "dist/bridge-pubsub.mjs"]);
    for (const file of copied) assert.ok(paths.includes(file), `the Dockerfile copies ${file}, which is packed`);
    t.diagnostic(`tarball ${mib(statSync(tarball).size)} (${packed[0]!.files.length} files, ${mib(packed[0]!.unpackedSize)} unpacked)`);
  });

  it("installs from the tarball as the README says: npx --package <tgz> crdfn init motd --crdfn <tgz>, cd, npm install", () => {
    // The README's commands as written, after the pack, up to npm test (the next tests run the rest).
    host = work;
    let cwd = host;
    const [init, cd, npmInstall] = install.slice(1, 4);
    assert.match(cd!, /^cd motd$/);
    assert.equal(npmInstall, "npm install");
    // --prefer-offline as npm's own setting: what npm's cache holds is taken without asking the
    // registry again whether it is current (~13 s of revalidation per install here).
    const env = { ...env24, npm_config_prefer_offline: "true", npm_config_audit: "false", npm_config_fund: "false" };
    const out = timed("crdfn init", () => run("sh", ["-c", init!], cwd, env));
    assert.match(out, /^created motd\/ \(a Motd operator\)/m);
    cwd = project = join(host, "motd");
    assert.deepEqual(readdirSync(project).sort(), [
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
    ]);
    assert.equal(
      (JSON.parse(readFileSync(join(project, "package.json"), "utf8")) as { dependencies: Record<string, string> }).dependencies.crdfn,
      `file:../crdfn/${basename(tarball)}`,
      "--crdfn: the project depends on the tarball, by a path relative to itself",
    );
    timed("npm install", () => run("sh", ["-c", npmInstall], cwd, env));
    assert.deepEqual(install.slice(4), ["npm test", "npm run dev"]);
    assert.equal(
      (JSON.parse(readFileSync(join(project, "package.json"), "utf8")) as { scripts: Record<string, string> }).scripts.dev,
      "crdfn dev --operator operator.ts --apply sample.yaml",
      "npm run dev is the crdfn dev the last test runs",
    );
  });

  it("resolves nothing back into the repository", () => {
    for (const [link, target] of [...symlinks(host), ...symlinks(project)]) assert.ok(!inRepo(target), `${link} → ${target}`);
    for (const file of [join(project, "package.json"), join(project, "package-lock.json")]) {
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

  it("moved to another folder with the tarball beside it, still installs (offline, from the tarball) and passes its test", () => {
    // The project and the folder crdfn the README packs into, as a user moves or commits them: no absolute path holds either.
    const moved = join(work, "moved");
    mkdirSync(join(moved, "crdfn"), { recursive: true });
    cpSync(tarball, join(moved, "crdfn", basename(tarball)));
    cpSync(project, join(moved, "motd"), { recursive: true, filter: (src) => !src.includes(`${sep}node_modules`) });
    const env = { ...env24, npm_config_offline: "true", npm_config_audit: "false", npm_config_fund: "false" };
    run("npm", ["install"], join(moved, "motd"), env);
    assert.equal(
      realpathSync(createRequire(join(moved, "motd", "package.json")).resolve("crdfn/package.json")),
      join(moved, "motd", "node_modules", "crdfn", "package.json"),
    );
    assert.match(run("npm", ["test"], join(moved, "motd"), env24), /[#ℹ] pass 2\n[#ℹ] fail 0\n/);
    rmSync(moved, { recursive: true, force: true });
  });

  it("fails npm test when no test ran", () => {
    const test = join(project, "operator.test.ts");
    const kept = readFileSync(test, "utf8");
    try {
      writeFileSync(test, "export {};\n");
      const r = spawnSync("npm", ["test"], { cwd: project, env: env24, encoding: "utf8" });
      assert.notEqual(r.status, 0, r.stdout);
      assert.match(r.stderr, /^crdfn: test: no test ran in operator\.test\.ts/m);
    } finally {
      writeFileSync(test, kept);
    }
  });

  it("generates the deploy files once what crdfn cannot know is given, and `serverless package` packages them as they are (offline)", (t) => {
    const refused = spawnSync("npx", ["crdfn", "generate"], { cwd: project, env: env24, encoding: "utf8" });
    assert.equal(refused.status, 2, refused.stderr);
    assert.match(
      refused.stderr,
      /^crdfn: crdfn\.deploy\.yaml: set cluster .*, bridge\.image .*, queues\.urlBase .*: crdfn cannot know them and writes no placeholder$/m,
    );
    const settings = join(project, "crdfn.deploy.yaml");
    writeFileSync(
      settings,
      readFileSync(settings, "utf8")
        .replace(/^cluster: .*$/m, "cluster: prod")
        .replace(/^ {2}image: .*$/m, "  image: 123456789012.dkr.ecr.eu-west-1.amazonaws.com/motd-bridge:0.1.0")
        .replace(/^ {2}urlBase: .*$/m, "  urlBase: https://sqs.eu-west-1.amazonaws.com/123456789012"),
    );
    assert.match(run("npm", ["run", "generate"], project, env24), /wrote \d+ files into deploy\//);
    const params = [
      "eksCluster=prod",
      "kubeServer=https://0123456789ABCDEF.gr7.eu-west-1.eks.amazonaws.com",
      `kubeCaData=${Buffer.from("-----BEGIN CERTIFICATE-----\n").toString("base64")}`,
      "eventKeysLabel=k1",
    ].map((p) => `--param=${p}`);
    const packaged = timed("serverless package", () =>
      spawnSync("npx", ["serverless", "package", "--stage", "test", "--region", "eu-west-1", ...params], {
        cwd: project,
        env: { ...env24, ...SERVERLESS_OFFLINE },
        encoding: "utf8",
      }),
    );
    assert.equal(packaged.status, 0, `${packaged.stdout}\n${packaged.stderr}`);
    // Serverless writes its progress to stderr.
    assert.match(packaged.stdout + packaged.stderr, /Service packaged/);
    const template = JSON.parse(readFileSync(join(project, ".serverless", "cloudformation-template-update-stack.json"), "utf8")) as {
      Resources: Record<string, { Type: string; Properties: Record<string, unknown> }>;
    };
    const byType = (type: string) =>
      Object.values(template.Resources)
        .filter((r) => r.Type === type)
        .map((r) => r.Properties);
    assert.deepEqual(
      byType("AWS::Lambda::Function").map((f) => [f.FunctionName, f.Handler]),
      [["motd-test-motd", "lambda.handler"]],
    );
    assert.deepEqual(
      byType("AWS::SQS::Queue")
        .map((q) => q.QueueName)
        .sort(),
      ["crdfn-motd-motd-dlq.fifo", "crdfn-motd-motd.fifo"],
    );
    assert.deepEqual(
      byType("AWS::EKS::PodIdentityAssociation").map((a) => [a.ClusterName, a.Namespace, a.ServiceAccount]),
      [["prod", "crdfn-system", "crdfn-bridge-motd"]],
    );
    const zip = join(project, ".serverless", "motd.zip");
    // As scaffolded: `npm run package`, no param given, no AWS account (its stage's params reach
    // nothing), and nothing in the environment turning telemetry off: the script itself does.
    const { AWS_ACCESS_KEY_ID: _id, AWS_SECRET_ACCESS_KEY: _secret, SLS_TELEMETRY_DISABLED: _t, SLS_NOTIFICATIONS_MODE: _n, ...noAccount } = SERVERLESS_OFFLINE;
    const home = mkdtempSync(join(work, "home-"));
    const scripted = timed("npm run package", () =>
      spawnSync("npm", ["run", "package"], { cwd: project, env: { ...env24, ...noAccount, HOME: home }, encoding: "utf8" }),
    );
    assert.equal(scripted.status, 0, `${scripted.stdout}\n${scripted.stderr}`);
    assert.match(scripted.stdout + scripted.stderr, /Service packaged/);
    // A telemetry payload the (refused) network could not take is kept there for the next run.
    const telemetry = join(home, ".serverless", "telemetry-cache");
    assert.deepEqual(existsSync(telemetry) ? readdirSync(telemetry) : [], [], "npm run package sent (or kept) no telemetry");
    t.diagnostic(`motd.zip: ${(statSync(zip).size / 1024).toFixed(0)} KiB`);
  });

  it("runs the bridge bundle its Dockerfile copies, from the installed package alone", () => {
    const bundle = join(project, "node_modules", "crdfn", "dist", "bridge.mjs");
    // Outside any node_modules: the image holds that one file and Node.
    const alone = mkdtempSync(join(work, "bridge-image-"));
    writeFileSync(join(alone, "bridge.mjs"), readFileSync(bundle));
    const r = spawnSync("node", ["bridge.mjs"], {
      cwd: alone,
      env: { ...env24, CRDFN_QUEUE_URL: "https://sqs.eu-west-1.amazonaws.com/123456789012/q.fifo" },
      encoding: "utf8",
      timeout: 30_000,
    });
    assert.equal(r.status, 2, `${r.stdout}\n${r.stderr}`);
    assert.match(r.stderr, /CRDFN_RESOURCES: is required/);
  });

  it("prints the project's CRD (npx crdfn crd operator.ts)", () => {
    const crd = run("npx", ["crdfn", "crd", "operator.ts"], project, env24);
    assert.match(crd, /^kind: CustomResourceDefinition$/m);
    assert.match(crd, /name: motds\.demo\.example\.com/);
  });

  it("reconciles its sample in the emulator (npx crdfn dev), and stops cleanly on Ctrl-C", async (t) => {
    const t0 = Date.now();
    // Its own process group, as a shell's foreground job: Ctrl-C reaches npx and crdfn alike.
    const child = spawn("npx", ["crdfn", "dev", "--operator", "operator.ts", "--apply", "sample.yaml"], {
      cwd: project,
      env: env24,
      detached: true,
      stdio: ["ignore", "pipe", "pipe"],
    });
    dev = child;
    let out = "";
    child.stdout.setEncoding("utf8").on("data", (s: string) => (out += s));
    child.stderr.setEncoding("utf8").on("data", (s: string) => (out += s));
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      child.on("exit", (code, signal) => resolve({ code, signal })),
    );
    const deadline = Date.now() + 240_000;
    while (!/^✔ Motd welcome reconciled in /m.test(out)) {
      assert.ok(Date.now() < deadline && child.exitCode === null, `no reconcile line from crdfn dev:\n${out}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    phases["crdfn dev to first reconcile"] = Date.now() - t0;
    process.kill(-child.pid!, "SIGINT");
    // crdfn stops everything and exits 0; npx then re-raises the Ctrl-C it was sent, as a shell expects.
    const { code, signal } = await exited;
    assert.ok(code === 0 || signal === "SIGINT", `npx crdfn dev ended with ${code ?? signal}:\n${out}`);
    // A reconcile already under way when Ctrl-C came may still say so before "stopped".
    assert.match(out, /^stopping…\n(?:✔ .*\n)*stopped$/m);
    assert.throws(() => process.kill(-child.pid!, 0), { code: "ESRCH" }, "nothing of crdfn dev is left running in its process group");
    const initToReconcile = ["crdfn init", "npm install", "crdfn dev to first reconcile"].reduce((sum, phase) => sum + (phases[phase] ?? 0), 0);
    const installed = duKiB(join(project, "node_modules")) * 1024;
    for (const [phase, ms] of Object.entries(phases)) t.diagnostic(`${phase}: ${(ms / 1000).toFixed(1)} s`);
    t.diagnostic(`crdfn init → first reconcile line (init + npm install + crdfn dev): ${(initToReconcile / 1000).toFixed(1)} s`);
    t.diagnostic(
      `installed size (du of the new project's node_modules): ${mib(installed)}; crdfn itself ${mib(duKiB(join(project, "node_modules", "crdfn")) * 1024)}`,
    );
  });

  describe("under a Node older than 22.18", () => {
    let envOld: NodeJS.ProcessEnv;
    before(async () => {
      envOld = userEnv(await oldNode());
    });

    it("crdfn says in one line which Node it needs, and npm install and npm test refuse", () => {
      const node = run("node", ["--version"], project, envOld).trim();
      const r = spawnSync("npx", ["--yes", "--package", tarball, "crdfn", "init", "another"], { cwd: host, env: envOld, encoding: "utf8" });
      assert.equal(r.status, 1, r.stderr);
      // npm's own warnings aside (this machine's npm config may have some), crdfn says one line.
      const lines = r.stderr
        .trim()
        .split("\n")
        .filter((l) => !l.startsWith("npm "));
      assert.equal(lines.length, 1, r.stderr);
      assert.match(lines[0]!, new RegExp(`^crdfn: needs Node\\.js 22\\.18 or newer; this is ${node.replace(/\./g, "\\.")} \\(.*\\)$`));
      assert.ok(!existsSync(join(host, "another")), "nothing made");
      const test = spawnSync("npm", ["test"], { cwd: project, env: envOld, encoding: "utf8" });
      assert.notEqual(test.status, 0, test.stdout);
      assert.match(test.stderr, /crdfn: needs Node\.js 22\.18 or newer/);
      const install = spawnSync("npm", ["install", "--offline", "--no-audit", "--no-fund"], { cwd: project, env: envOld, encoding: "utf8" });
      assert.notEqual(install.status, 0, install.stdout);
      assert.match(install.stderr, /notsup Required: \{"node":">=22\.18"\}/);
    });
  });

  describe("the same install under Node 22", () => {
    let env22: NodeJS.ProcessEnv;
    before(async () => {
      env22 = userEnv(await cachedNode(22));
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
  env: { CRDFN_KUBE_AUTH: "token", CRDFN_KUBE_SERVER: "https://127.0.0.1:9", CRDFN_KUBE_TOKEN: "t", CRDFN_EVENT_KEYS: "k1:AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=", AWS_REGION: "us-east-1", LOG_LEVEL: "silent" },
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
      assert.match(run("npx", ["crdfn", "crd", "operator.ts"], project, env22), /name: motds\.demo\.example\.com/);
    });
  });
});
