// cfn-lint (with its serverless rules) and checkov, the field's own checkers of what
// `crdfn generate` and `serverless package` write (test/deploy-lint.test.ts): installed once per
// machine from PyPI into a Python venv under the cache, named by a hash of the pins in
// infra/deploy-linters/requirements.txt, as ElasticMQ and the control plane are prepared. A venv
// counts only once pip succeeded in it (a marker file), so a half-installed one is never used; a
// lock folder serializes processes installing at once.
import { spawn, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { SetupError } from "./errors.ts";
import { withBuildLock } from "./build-once.ts";
import { cacheRoot, packageRoot } from "./paths.ts";

const requirements = join(packageRoot, "infra", "deploy-linters", "requirements.txt");

export interface DeployLinters {
  cfnLint: string;
  checkov: string;
  /** The pinned versions, by PyPI name: what a report names. */
  versions: Record<string, string>;
  venv: string;
}

/** The `name==version` pins of requirements.txt: the one source of the tools' versions. */
export function pinnedDeployLinters(): Record<string, string> {
  const pins: Record<string, string> = {};
  for (const line of readFileSync(requirements, "utf8").split("\n")) {
    const m = /^\s*([A-Za-z0-9_.-]+)==(\S+)/.exec(line);
    if (m?.[1] && m[2]) pins[m[1]] = m[2];
  }
  for (const name of ["cfn-lint", "cfn-lint-serverless", "checkov"]) {
    if (!pins[name]) throw new SetupError(`infra/deploy-linters/requirements.txt does not pin ${name} (name==version)`);
  }
  return pins;
}

export interface DeployLinterOptions {
  env: NodeJS.ProcessEnv;
  log: (line: string) => void;
  /** A lock older than this belongs to an install that was killed. */
  staleLockMs?: number;
}

/** Installs (once) and returns cfn-lint and checkov. */
export async function deployLinters({ env, log, staleLockMs = 1_800_000 }: DeployLinterOptions): Promise<DeployLinters> {
  const versions = pinnedDeployLinters();
  const hash = createHash("sha256").update(readFileSync(requirements)).digest("hex").slice(0, 12);
  const venv = join(cacheRoot(env), "deploy-linters", hash);
  const linters: DeployLinters = { cfnLint: join(venv, "bin", "cfn-lint"), checkov: join(venv, "bin", "checkov"), versions, venv };
  const marker = join(venv, ".crdfn-installed");
  const complete = () => existsSync(marker);
  if (complete()) return linters;
  await withBuildLock({ what: "cfn-lint and checkov", dir: venv, complete, staleLockMs, pollMs: 5000, log }, () => install(venv, marker, versions, env, log));
  return linters;
}

async function install(venv: string, marker: string, versions: Record<string, string>, env: NodeJS.ProcessEnv, log: (line: string) => void): Promise<void> {
  const python = spawnSync("python3", ["--version"], { encoding: "utf8", env });
  if (python.error) {
    throw new SetupError(
      "python3 is not installed, and it is needed once to install cfn-lint and checkov (PyPI) for the deploy checks: install Python ≥ 3.9 with its venv module (Debian: python3-venv)",
    );
  }
  // A venv's scripts name its interpreter by absolute path, so it cannot be built elsewhere and
  // moved: it is made in place, and counts only once the marker pip's success writes is there.
  rmSync(venv, { recursive: true, force: true });
  const what = Object.entries(versions)
    .map(([n, v]) => `${n} ${v}`)
    .join(", ");
  log(`installing ${what} from PyPI with ${python.stdout.trim()} (first run only; about 2 min)`);
  log(`  venv: ${venv}`);
  const made = spawnSync("python3", ["-m", "venv", venv], { encoding: "utf8", env });
  if (made.status !== 0) {
    rmSync(venv, { recursive: true, force: true });
    throw new SetupError(`python3 -m venv failed (Debian: install python3-venv): ${(made.stderr || made.stdout).trim().split("\n").slice(-3).join(" ")}`);
  }
  const started = Date.now();
  const pip = spawn(join(venv, "bin", "pip"), ["install", "--disable-pip-version-check", "--no-input", "--progress-bar", "off", "-r", requirements], {
    env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  // pip names each distribution it fetches ("Collecting x"): count them to show progress.
  let collected = 0;
  let tail: string[] = [];
  const onOutput = (chunk: Buffer) => {
    const lines = chunk.toString().split("\n").filter(Boolean);
    collected += lines.filter((l) => l.startsWith("Collecting ")).length;
    tail = [...tail, ...lines].slice(-15);
  };
  pip.stdout.on("data", onOutput);
  pip.stderr.on("data", onOutput);
  const ticker = setInterval(() => log(`  …${Math.round((Date.now() - started) / 1000)}s, ${collected} distributions collected`), 15_000);
  const code = await new Promise<number | null>((resolve) => pip.on("close", resolve));
  clearInterval(ticker);
  if (code !== 0) {
    rmSync(venv, { recursive: true, force: true });
    throw new SetupError(`installing cfn-lint and checkov from PyPI failed (pip exited ${code}):\n${tail.join("\n")}`);
  }
  writeFileSync(marker, `${JSON.stringify(versions)}\n`);
  log(`installed cfn-lint and checkov in ${Math.round((Date.now() - started) / 1000)}s`);
}
