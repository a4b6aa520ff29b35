// The README's command blocks run as written, from a fresh clone of this checkout's HEAD (no
// node_modules, nothing built), in a shell a user would have: this Node 24 and the kubectl crdfn
// builds on PATH, nothing of this checkout's npm run. Every ```sh block says whether it runs here
// (run=checkout: in the clone; run=install: beside it, where the README puts the project) or not
// (run=no, with needs=<what it needs that a test machine has not>); a block that says neither is
// refused, so a new one cannot silently go untested. A long-running command (`npm start`,
// `npm run dev`) runs until the line the README says it prints, the kubectl checks the README
// gives for it run while it is up, then Ctrl-C (SIGINT to its process group) must end it with 0.
// Caches are the machine's: ~/.cache/crdfn (the control plane's binaries, ElasticMQ) and npm's.
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, dirname, join, sep } from "node:path";
import { after, before, describe, it } from "node:test";
import { controlPlaneBinaries } from "../emulator/binaries.ts";
import { packageRoot } from "../emulator/paths.ts";

interface Block {
  section: string;
  line: number;
  run: string | undefined;
  text: string;
}

const readme = readFileSync(join(packageRoot, "README.md"), "utf8");

function shellBlocks(): Block[] {
  const lines = readme.split("\n");
  const blocks: Block[] = [];
  let section = "";
  for (let i = 0; i < lines.length; i++) {
    const heading = /^##+ (.*)$/.exec(lines[i]!);
    if (heading) section = heading[1]!;
    const open = /^```(sh|bash|shell)\b(.*)$/.exec(lines[i]!);
    if (!open) continue;
    const body: string[] = [];
    let j = i + 1;
    for (; j < lines.length && lines[j]!.trim() !== "```"; j++) body.push(lines[j]!);
    blocks.push({ section, line: i + 1, run: /\brun=(\S+)/.exec(open[2]!)?.[1], text: body.join("\n") });
    i = j;
  }
  return blocks;
}

/** The section's prose, where the README gives the checks to run while a command is up. */
const sectionText = (title: string): string => readme.split(/^## /m).find((s) => s.startsWith(`${title}\n`)) ?? "";
const kubectlChecks = (title: string): string[] =>
  [...sectionText(title).matchAll(/`(kubectl --kubeconfig \.crdfn\/kubeconfig get [^`…]+)`/g)].map((m) => m[1]!.trim());

/** What the README says a long-running command prints once it is up, and the checks to run then. */
const LONG_RUNNING: Record<string, { ready: RegExp }> = {
  "npm start": { ready: /^✔ \w+ \S+ reconciled in/m },
  "npm run dev": { ready: /^✔ Motd welcome reconciled in \d+ ms/m },
};
/** Lines that are not run, each with why. */
const NOT_RUN: Record<string, string> = {
  // The Quick start's `npm test` is the suite this file is part of.
  "npm test      # typecheck, lint, layering, unit and integration tests against real servers": "the suite running this test",
};

const repoRoots = [packageRoot, realpathSync(join(packageRoot, "node_modules"))];
const inRepo = (path: string): boolean => repoRoots.some((root) => path === root || path.startsWith(root + sep));

describe("the README's commands", { timeout: 1_500_000 }, () => {
  const blocks = shellBlocks();
  let work = "";
  let env: NodeJS.ProcessEnv = {};

  before(async () => {
    const kubectl = (await controlPlaneBinaries({ env: process.env, log: () => {} })).kubectl;
    for (const [k, v] of Object.entries(process.env)) {
      // NODE_TEST_CONTEXT would make a project's `node --test` report to this runner instead.
      if (/^npm_/i.test(k) || k === "NODE_OPTIONS" || k === "NODE_TEST_CONTEXT" || k === "INIT_CWD") continue;
      env[k] = v;
    }
    const path = (process.env.PATH ?? "").split(delimiter).filter((p) => p !== "" && !inRepo(existsSync(p) ? realpathSync(p) : p));
    env = {
      ...env,
      PATH: [dirname(process.execPath), dirname(kubectl), ...path].join(delimiter),
      // npm's cache as it is: a fresh `npm ci` takes what it holds without asking the registry.
      npm_config_prefer_offline: "true",
      npm_config_audit: "false",
      npm_config_fund: "false",
      SLS_TELEMETRY_DISABLED: "1",
      SLS_NOTIFICATIONS_MODE: "off",
    };
    work = mkdtempSync(join(tmpdir(), "crdfn-readme-"));
    // Where the README's "Your own project" has the checkout: the folder `crdfn`, beside the project.
    const clone = spawnSync("git", ["clone", "--quiet", "--no-hardlinks", packageRoot, join(work, "crdfn")], { encoding: "utf8" });
    assert.equal(clone.status, 0, clone.stderr);
  });
  after(() => {
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it("every shell block says whether it runs here", () => {
    assert.ok(blocks.length >= 3, "the README has shell blocks");
    for (const b of blocks) {
      assert.ok(b.run !== undefined, `README.md:${b.line} (${b.section}): a shell block needs run=checkout, run=install or run=no needs=…`);
      assert.ok(["checkout", "install", "no"].includes(b.run), `README.md:${b.line}: run=${b.run} is none of checkout, install, no`);
      if (b.run === "no") assert.match(readme.split("\n")[b.line - 1]!, /\bneeds=\S+/, `README.md:${b.line}: run=no says what it needs (needs=…)`);
    }
    for (const title of ["Quick start", "Your own project"]) {
      assert.ok(
        blocks.some((b) => b.section === title && b.run !== "no"),
        `${title}: its commands run here`,
      );
    }
  });

  /** Runs a block's lines in one shell, as a user pastes them; returns the folder it ends in. */
  async function runBlock(b: Block, from: string): Promise<string> {
    let cwd = from;
    let pending: string[] = [];
    const flush = () => {
      if (pending.length === 0) return;
      const pwd = join(work, ".pwd");
      const script = `set -euo pipefail\ncd "$1"\n${pending.join("\n")}\npwd > "$2"\n`;
      const started = Date.now();
      const r = spawnSync("bash", ["-c", script, "bash", cwd, pwd], { env, encoding: "utf8", maxBuffer: 256 << 20 });
      console.log(`# README.md:${b.line}: ${pending.map((l) => l.replace(/\s+#.*$/, "")).join("; ")} (${((Date.now() - started) / 1000).toFixed(1)} s)`);
      assert.equal(
        r.status,
        0,
        `README.md:${b.line}: ${pending.join("\n")}\nin ${cwd} exited ${r.status ?? r.signal}:\n${r.stdout.slice(-4000)}\n${r.stderr.slice(-4000)}`,
      );
      cwd = readFileSync(pwd, "utf8").trim();
      pending = [];
    };
    for (const line of b.text.split("\n")) {
      if (line.trim() === "" || line in NOT_RUN) continue;
      const command = line.replace(/\s+#.*$/, "").trim();
      if (command in LONG_RUNNING) {
        flush();
        await runUntilReady(b, command, cwd, kubectlChecks(b.section));
      } else pending.push(line);
    }
    flush();
    return cwd;
  }

  async function runUntilReady(b: Block, command: string, cwd: string, checks: string[]): Promise<void> {
    const started = Date.now();
    const child = spawn("bash", ["-c", `exec ${command}`], { cwd, env, detached: true, stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    child.stdout.on("data", (c: Buffer) => (output += c.toString()));
    child.stderr.on("data", (c: Buffer) => (output += c.toString()));
    const exited = new Promise<number | string>((resolve) => child.once("exit", (code, sig) => resolve(code ?? sig ?? "?")));
    try {
      const ready = await Promise.race([
        new Promise<true>((resolve) => {
          const poll = setInterval(() => {
            if (LONG_RUNNING[command]!.ready.test(output)) {
              clearInterval(poll);
              resolve(true);
            }
          }, 100);
          void exited.then(() => clearInterval(poll));
        }),
        exited.then((code) => `exited ${code}`),
        new Promise<string>((resolve) => setTimeout(() => resolve("no ready line within 20 minutes"), 1_200_000).unref()),
      ]);
      assert.equal(ready, true, `README.md:${b.line}: ${command} in ${cwd}: ${String(ready)}:\n${output.slice(-6000)}`);
      console.log(`# README.md:${b.line}: ${command} up (${((Date.now() - started) / 1000).toFixed(1)} s)`);
      for (const check of checks) {
        const r = spawnSync("bash", ["-c", check], { cwd, env, encoding: "utf8" });
        assert.equal(r.status, 0, `${b.section}: \`${check}\` while ${command} is up exited ${r.status ?? r.signal}:\n${r.stdout}\n${r.stderr}`);
        console.log(`# ${check}:\n${r.stdout.replace(/^/gm, "#   ")}`);
      }
      // Ctrl-C: the terminal signals the whole foreground process group.
      process.kill(-child.pid!, "SIGINT");
      const code = await Promise.race([exited, new Promise<string>((resolve) => setTimeout(() => resolve("still running 60 s after Ctrl-C"), 60_000).unref())]);
      // npm runs the script through sh, which Ctrl-C ends too, and npm then re-raises the signal:
      // a shell shows 130 for what was a clean stop. Clean is crdfn's own "stopped" and no
      // process of the group left behind, the npm's exit being 0 or that re-raised SIGINT.
      assert.ok(code === 0 || code === "SIGINT", `README.md:${b.line}: ${command} after Ctrl-C: ${code}:\n${output.slice(-4000)}`);
      assert.match(output, /^stopped$/m, `README.md:${b.line}: ${command} said it stopped`);
      assert.throws(() => process.kill(-child.pid!, 0), /ESRCH/, `README.md:${b.line}: a process of ${command} outlived Ctrl-C`);
    } finally {
      if (child.exitCode === null && child.signalCode === null) {
        try {
          process.kill(-child.pid!, "SIGKILL");
        } catch {
          // already gone
        }
      }
    }
  }

  /**
   * Deploying's lines that need no cluster, registry or cloud, verbatim, in the project: refused
   * in one line until what crdfn cannot know is set, then written, then checked, and a stale
   * file named. Its kubectl lines run verbatim in test/deploy-kubernetes.test.ts.
   */
  function deployingOffline(project: string): void {
    const deploying = blocks.find((b) => b.section === "Deploying");
    assert.ok(deploying, "README has a Deploying block");
    const offline = deploying.text.split("\n").filter((l) => /^(export |npx crdfn generate\b)/.test(l));
    const generate = offline.find((l) => /^npx crdfn generate\s+#/.test(l) || l.trim() === "npx crdfn generate");
    const check = offline.find((l) => /^npx crdfn generate --check\b/.test(l));
    assert.ok(generate && check, `README's Deploying block has \`npx crdfn generate\` and \`npx crdfn generate --check\`: ${offline.join(" | ")}`);
    const sh = (line: string) => spawnSync("bash", ["-c", `set -euo pipefail\n${line}`], { cwd: project, env, encoding: "utf8" });
    const unset = sh(generate);
    assert.notEqual(unset.status, 0, "generate refuses a crdfn.deploy.yaml with its blanks");
    assert.match(unset.stderr, /set cluster .*bridge\.image .*queues\.urlBase .*writes no placeholder/, unset.stderr);
    assert.doesNotMatch(unset.stderr, /^\s+at /m, `one line, no stack: ${unset.stderr}`);
    // What crdfn cannot know, filled in where the scaffold leaves it blank, as a user does.
    const settings = join(project, "crdfn.deploy.yaml");
    writeFileSync(
      settings,
      readFileSync(settings, "utf8")
        .replace(/^cluster:( +#)/m, "cluster: motd-prod$1")
        .replace(/^ {2}image:( +#)/m, "  image: registry.example.com/motd/crdfn-bridge:0.1.0$1")
        .replace(/^ {2}urlBase:( +#)/m, "  urlBase: https://sqs.eu-west-1.amazonaws.com/123456789012$1"),
    );
    runBlockSync({ section: "Deploying", line: deploying.line, run: "install", text: offline.join("\n") }, project);
    for (const file of ["deploy/kustomization.yaml", "deploy/serverless/functions.yml"]) assert.ok(existsSync(join(project, file)), `${file} written`);
    const stale = join(project, "deploy", "kustomization.yaml");
    writeFileSync(stale, `${readFileSync(stale, "utf8")}# edited by hand\n`);
    const refused = sh(check);
    assert.notEqual(refused.status, 0, "--check fails on a stale file");
    assert.match(`${refused.stdout}${refused.stderr}`, /deploy is stale[\s\S]*\bkustomization\.yaml \(differs\)/, "naming it");
    assert.equal(sh(generate).status, 0);
  }

  /** A block of commands that end (no long-running one) in one shell. */
  function runBlockSync(b: Block, cwd: string): void {
    const started = Date.now();
    const r = spawnSync("bash", ["-c", `set -euo pipefail\n${b.text}`], { cwd, env, encoding: "utf8", maxBuffer: 256 << 20 });
    console.log(
      `# README.md:${b.line}: ${b.text
        .split("\n")
        .map((l) => l.replace(/\s+#.*$/, ""))
        .join("; ")} (${((Date.now() - started) / 1000).toFixed(1)} s)`,
    );
    assert.equal(r.status, 0, `README.md:${b.line}: ${b.text}\nin ${cwd} exited ${r.status ?? r.signal}:\n${r.stdout.slice(-4000)}\n${r.stderr.slice(-4000)}`);
  }

  it("Quick start: npm start in a fresh clone comes up, answers kubectl, and stops on Ctrl-C", { timeout: 1_500_000 }, async () => {
    const quick = blocks.filter((b) => b.section === "Quick start" && b.run === "checkout");
    assert.ok(quick.length > 0);
    for (const b of quick) await runBlock(b, join(work, "crdfn"));
  });

  it(
    "Your own project: pack, init, install, unit test and dev, as written; Deploying's generate and its check; then moved with its tarball, install and dev again",
    { timeout: 900_000 },
    async () => {
      const own = blocks.filter((b) => b.section === "Your own project" && b.run === "install");
      assert.ok(own.length > 0);
      let project = work;
      for (const b of own) project = await runBlock(b, work);
      // crdfn init writes the tarball as a file: dependency relative to the project, so the two move together.
      const pkg = JSON.parse(readFileSync(join(project, "package.json"), "utf8")) as { dependencies: Record<string, string> };
      assert.equal(pkg.dependencies.crdfn, "file:../crdfn/crdfn-0.1.0.tgz");
      deployingOffline(project);
      const elsewhere = join(work, "moved", "somewhere");
      mkdirSync(dirname(elsewhere), { recursive: true });
      mkdirSync(elsewhere);
      renameSync(join(work, "crdfn"), join(elsewhere, "crdfn"));
      renameSync(project, join(elsewhere, "motd"));
      const moved: Block = { section: "Your own project", line: own[0]!.line, run: "install", text: "npm install\nnpm run dev" };
      await runBlock(moved, join(elsewhere, "motd"));
      // Put back where the next test (if any) finds them.
      renameSync(join(elsewhere, "crdfn"), join(work, "crdfn"));
    },
  );
});
