// A pinned Go wrapper module (infra/controlplane, infra/pubsub, infra/lambda-rie) built once per
// machine: `go build` from the Go module proxy into a cache folder named by a hash of the pin
// (build-once.ts: serialized across processes, never half-built), with progress while it compiles.
import { spawn, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { buildOnceInto } from "./build-once.ts";
import { SetupError } from "./errors.ts";
import { cacheRoot, packageRoot } from "./paths.ts";

/** A short hash of the module's pin (its files) and of how it is built. */
export function pinHash(moduleDir: string, files: readonly string[], buildFlags: string): string {
  const h = createHash("sha256");
  for (const f of files) h.update(readFileSync(join(moduleDir, f)));
  h.update(buildFlags);
  return h.digest("hex").slice(0, 12);
}

export interface GoBuild {
  /** What is built, in words: "the control plane". */
  what: string;
  moduleDir: string;
  /** The cache folder it ends up in. */
  dir: string;
  /** `go build` arguments after `build -v -trimpath`, writing into `out`. */
  args: (out: string) => string[];
  /** Whether `dir` already holds everything (another process may have built it meanwhile). */
  complete: () => boolean;
  /** The refusal when Go is not installed: what it is needed for, and the way around it. */
  withoutGo: string;
  /** How long it takes, for the first line ("about a minute"). */
  takes: string;
  /** A lock older than this belongs to a build that was killed. */
  staleLockMs: number;
  /** How often a waiting process looks again. */
  pollMs: number;
  env: NodeJS.ProcessEnv;
  log: (line: string) => void;
}

export async function buildOnce(b: GoBuild): Promise<void> {
  await buildOnceInto({
    what: b.what,
    dir: b.dir,
    complete: b.complete,
    staleLockMs: b.staleLockMs,
    pollMs: b.pollMs,
    log: b.log,
    build: (tmp) => build(b, tmp),
  });
}

async function build(b: GoBuild, tmp: string): Promise<void> {
  const go = spawnSync("go", ["version"], { encoding: "utf8", env: b.env });
  if (go.error) throw new SetupError(b.withoutGo);
  b.log(`building ${b.what} with ${go.stdout.trim()} (first run only; ${b.takes})`);
  b.log(`  cache: ${b.dir}`);
  const started = Date.now();
  const child = spawn("go", ["build", "-v", "-trimpath", ...b.args(tmp)], {
    cwd: b.moduleDir,
    env: { ...b.env, GOFLAGS: "-buildvcs=false -mod=readonly", CGO_ENABLED: "0" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  // `go build -v` names each package as it compiles it: count them to show progress.
  let packages = 0;
  let tail: string[] = [];
  const onOutput = (chunk: Buffer) => {
    const lines = chunk.toString().split("\n").filter(Boolean);
    packages += lines.length;
    tail = [...tail, ...lines].slice(-20);
  };
  child.stdout.on("data", onOutput);
  child.stderr.on("data", onOutput);
  const ticker = setInterval(() => b.log(`  …${Math.round((Date.now() - started) / 1000)}s, ${packages} packages compiled`), 15_000);
  const code = await new Promise<number | null>((resolve) => child.on("close", resolve));
  clearInterval(ticker);
  if (code !== 0) throw new SetupError(`building ${b.what} failed (go build exited ${code}):\n${tail.join("\n")}`);
  b.log(`built ${b.what} in ${Math.round((Date.now() - started) / 1000)}s`);
}

/** The version a wrapper module's go.mod pins for `module` (the first group of `pattern`): the one source of truth. */
export function pinnedModuleVersion(moduleDir: string, pattern: RegExp, module: string): string {
  const m = pattern.exec(readFileSync(join(moduleDir, "go.mod"), "utf8"));
  if (!m?.[1]) throw new SetupError(`${relative(packageRoot, moduleDir)}/go.mod does not pin ${module}`);
  return m[1];
}

/** A single binary built from a pinned wrapper module. */
export interface PinnedBinary {
  /** The binary's file name (also looked for in CRDFN_BIN_DIR). */
  binary: string;
  moduleDir: string;
  /** The cache folder's name, to which the pin's hash is added. */
  cacheName: string;
  /** The module's files whose contents make the pin. */
  pinFiles: readonly string[];
  /** The package `go build` builds. */
  pkg: string;
  what: string;
  withoutGo: string;
  takes: string;
}

const BINARY_LDFLAGS = "-s -w";

/** Path of the binary: CRDFN_BIN_DIR's when it holds one, else the cached build (built on first use). */
export async function pinnedBinary(p: PinnedBinary, { env, log }: { env: NodeJS.ProcessEnv; log: (line: string) => void }): Promise<string> {
  if (env.CRDFN_BIN_DIR && existsSync(join(env.CRDFN_BIN_DIR, p.binary))) return join(env.CRDFN_BIN_DIR, p.binary);
  const dir = join(cacheRoot(env), "bin", `${p.cacheName}-${pinHash(p.moduleDir, p.pinFiles, BINARY_LDFLAGS)}`);
  const binary = join(dir, p.binary);
  if (!existsSync(binary))
    await buildOnce({
      what: p.what,
      moduleDir: p.moduleDir,
      dir,
      args: (out) => ["-ldflags", BINARY_LDFLAGS, "-o", join(out, p.binary), p.pkg],
      complete: () => existsSync(binary),
      withoutGo: p.withoutGo,
      takes: p.takes,
      staleLockMs: 1800_000,
      pollMs: 2000,
      env,
      log,
    });
  return binary;
}
