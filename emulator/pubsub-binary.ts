// The Pub/Sub emulator binary: the fake of Google's Go client (pstest), served by the pinned
// wrapper module in infra/pubsub, built once with `go build` from the Go module proxy and
// cached outside the repo by a hash of that pin (as the control plane is, in binaries.ts).
import { spawn, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";
import { SetupError } from "./errors.ts";
import { cacheRoot, packageRoot } from "./paths.ts";

const moduleDir = join(packageRoot, "infra", "pubsub");
const LDFLAGS = "-s -w";
export const PUBSUB_EMULATOR_BINARY = "pubsub-emulator";

/** The pstest release pinned in infra/pubsub/go.mod: the one source of truth. */
export function pinnedPstestVersion(): string {
  const mod = readFileSync(join(moduleDir, "go.mod"), "utf8");
  const m = /^\s*(?:require\s+)?cloud\.google\.com\/go\/pubsub\/v2 (v\d+\.\d+\.\d+)/m.exec(mod);
  if (!m?.[1]) throw new SetupError("infra/pubsub/go.mod does not pin cloud.google.com/go/pubsub/v2");
  return m[1];
}

function pinHash(): string {
  const h = createHash("sha256");
  for (const f of ["go.mod", "go.sum", "main.go"]) h.update(readFileSync(join(moduleDir, f)));
  h.update(LDFLAGS);
  return h.digest("hex").slice(0, 12);
}

export interface PubSubBinaryOptions {
  env: NodeJS.ProcessEnv;
  log: (line: string) => void;
}

/** Path of the emulator binary: CRDFN_BIN_DIR's when it holds one, else the cached build (built on first use). */
export async function pubSubEmulatorBinary({ env, log }: PubSubBinaryOptions): Promise<string> {
  if (env.CRDFN_BIN_DIR && existsSync(join(env.CRDFN_BIN_DIR, PUBSUB_EMULATOR_BINARY))) return join(env.CRDFN_BIN_DIR, PUBSUB_EMULATOR_BINARY);
  const version = pinnedPstestVersion();
  const dir = join(cacheRoot(env), "bin", `pubsub-emulator-${version}-${pinHash()}`);
  const binary = join(dir, PUBSUB_EMULATOR_BINARY);
  if (!existsSync(binary)) await buildOnce(dir, binary, version, log, env);
  return binary;
}

/** Serializes builds across processes (parallel test files, a CLI beside a test run). */
async function buildOnce(dir: string, binary: string, version: string, log: (line: string) => void, env: NodeJS.ProcessEnv): Promise<void> {
  mkdirSync(join(dir, ".."), { recursive: true });
  const lock = `${dir}.lock`;
  for (;;) {
    try {
      mkdirSync(lock);
      break;
    } catch {
      // A lock older than 30 minutes belongs to a build that was killed (one takes ~1 min).
      const held = statSync(lock, { throwIfNoEntry: false });
      if (held && Date.now() - held.mtimeMs > 1800_000) rmSync(lock, { recursive: true, force: true });
      log("waiting for another process that is building the Pub/Sub emulator…");
      await new Promise((r) => setTimeout(r, 2000));
      if (existsSync(binary)) return;
    }
  }
  try {
    if (!existsSync(binary)) await build(dir, version, log, env);
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
}

async function build(dir: string, version: string, log: (line: string) => void, env: NodeJS.ProcessEnv): Promise<void> {
  const go = spawnSync("go", ["version"], { encoding: "utf8", env });
  if (go.error) {
    throw new SetupError(
      `Go is not installed, and it is needed once to build the Pub/Sub emulator (pstest ${version}): install Go ≥ 1.25, ` +
        `or set CRDFN_PUBSUB_EMULATOR_HOST to the host:port of a running Pub/Sub emulator`,
    );
  }
  const tmp = `${dir}.tmp-${process.pid}`;
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp, { recursive: true });
  log(`building the Pub/Sub emulator (pstest ${version}) with ${go.stdout.trim()} (first run only; about a minute)`);
  log(`  cache: ${dir}`);
  const started = Date.now();
  const child = spawn("go", ["build", "-v", "-trimpath", "-ldflags", LDFLAGS, "-o", join(tmp, PUBSUB_EMULATOR_BINARY), "."], {
    cwd: moduleDir,
    env: { ...env, GOFLAGS: "-buildvcs=false -mod=readonly", CGO_ENABLED: "0" },
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
  const ticker = setInterval(() => log(`  …${Math.round((Date.now() - started) / 1000)}s, ${packages} packages compiled`), 15_000);
  const code = await new Promise<number | null>((resolve) => child.on("close", resolve));
  clearInterval(ticker);
  if (code !== 0) {
    rmSync(tmp, { recursive: true, force: true });
    throw new SetupError(`building the Pub/Sub emulator failed (go build exited ${code}):\n${tail.join("\n")}`);
  }
  rmSync(dir, { recursive: true, force: true });
  renameSync(tmp, dir);
  log(`built the Pub/Sub emulator in ${Math.round((Date.now() - started) / 1000)}s`);
}
