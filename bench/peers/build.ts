// The peers' binaries and environments, built outside the repository (never committed): the
// controller-runtime operator from the Go module proxy, kopf in a venv from PyPI, both pinned.
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { cacheRoot, packageRoot } from "../../emulator/paths.ts";

export const peersDir = (env: NodeJS.ProcessEnv = process.env): string => join(cacheRoot(env), "peers");
const sourceDir = join(packageRoot, "bench", "peers");
export const kopfOperator = join(sourceDir, "kopf", "greeting_operator.py");

/** What is missing to build the peers (`go`, `python3` with venv), or [] if nothing. */
export function missingToolchains(): string[] {
  const missing: string[] = [];
  const works = (cmd: string, args: string[]) => {
    try {
      execFileSync(cmd, args, { stdio: "ignore" });
      return true;
    } catch {
      return false;
    }
  };
  if (!works("go", ["version"])) missing.push("go (1.24 or later) on PATH");
  if (!works("python3", ["-c", "import venv, ensurepip"])) missing.push("python3 with venv and ensurepip");
  return missing;
}

export interface Built {
  path: string;
  /** Wall time of this build (0.0x when nothing had changed). */
  seconds: number;
  versions: Record<string, string>;
}

const seconds = (t0: number): number => Math.round((performance.now() - t0) / 10) / 100;

/**
 * `go build` of bench/peers/controller-runtime (incremental: fast when nothing changed) into the
 * cache as `binary` (bench:platform builds its own, so a checkout running bench:peers meanwhile
 * cannot swap in a build without the flags it passes).
 */
export function buildControllerRuntime(log: (line: string) => void, binary = "greeting-controller-runtime"): Built {
  const path = join(peersDir(), binary);
  mkdirSync(peersDir(), { recursive: true });
  log("building the controller-runtime operator (go build)…");
  const t0 = performance.now();
  execFileSync("go", ["build", "-o", path, "."], { cwd: join(sourceDir, "controller-runtime"), stdio: ["ignore", "ignore", "inherit"] });
  const mod = readFileSync(join(sourceDir, "controller-runtime", "go.mod"), "utf8");
  const pin = (m: string) => new RegExp(`^\\s*${m.replace(/[.]/g, "\\.")} (v\\S+)`, "m").exec(mod)?.[1] ?? "?";
  return {
    path,
    seconds: seconds(t0),
    versions: {
      go: execFileSync("go", ["env", "GOVERSION"], { encoding: "utf8" }).trim(),
      "sigs.k8s.io/controller-runtime": pin("sigs.k8s.io/controller-runtime"),
      "k8s.io/client-go": pin("k8s.io/client-go"),
    },
  };
}

/** A venv with requirements.txt installed, rebuilt only when requirements.txt changes. */
export function ensureKopfVenv(log: (line: string) => void): Built {
  const venv = join(peersDir(), "kopf-venv");
  const python = join(venv, "bin", "python");
  const requirements = readFileSync(join(sourceDir, "kopf", "requirements.txt"), "utf8");
  const stamp = join(venv, "crdfn-requirements.txt");
  const t0 = performance.now();
  if (!existsSync(stamp) || readFileSync(stamp, "utf8") !== requirements) {
    log("creating the kopf venv (pip install from PyPI)…");
    const building = `${venv}.building`;
    rmSync(building, { recursive: true, force: true });
    mkdirSync(peersDir(), { recursive: true });
    execFileSync("python3", ["-m", "venv", building], { stdio: ["ignore", "ignore", "inherit"] });
    execFileSync(join(building, "bin", "pip"), ["install", "--quiet", "--disable-pip-version-check", "-r", join(sourceDir, "kopf", "requirements.txt")], {
      stdio: ["ignore", "ignore", "inherit"],
    });
    writeFileSync(join(building, "crdfn-requirements.txt"), requirements);
    rmSync(venv, { recursive: true, force: true });
    // Installed scripts' shebangs name the build folder; the benchmark only runs `python -m`.
    renameSync(building, venv);
  }
  const freeze = execFileSync(python, ["-m", "pip", "freeze", "--disable-pip-version-check"], { encoding: "utf8" }).trim().split("\n");
  return {
    path: python,
    seconds: seconds(t0),
    versions: {
      python: execFileSync(python, ["--version"], { encoding: "utf8" }).trim(),
      ...Object.fromEntries(freeze.map((l): [string, string] => [l.split("==")[0] ?? l, l.split("==")[1] ?? ""])),
    },
  };
}
