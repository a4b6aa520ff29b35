// The Pub/Sub emulator binary: the fake of Google's Go client (pstest), served by the pinned
// wrapper module in infra/pubsub, built once with `go build` from the Go module proxy and
// cached outside the repo by a hash of that pin (go-build.ts, as the control plane is).
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { SetupError } from "./errors.ts";
import { buildOnce, pinHash } from "./go-build.ts";
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

export interface PubSubBinaryOptions {
  env: NodeJS.ProcessEnv;
  log: (line: string) => void;
}

/** Path of the emulator binary: CRDFN_BIN_DIR's when it holds one, else the cached build (built on first use). */
export async function pubSubEmulatorBinary({ env, log }: PubSubBinaryOptions): Promise<string> {
  if (env.CRDFN_BIN_DIR && existsSync(join(env.CRDFN_BIN_DIR, PUBSUB_EMULATOR_BINARY))) return join(env.CRDFN_BIN_DIR, PUBSUB_EMULATOR_BINARY);
  const version = pinnedPstestVersion();
  const dir = join(cacheRoot(env), "bin", `pubsub-emulator-${version}-${pinHash(moduleDir, ["go.mod", "go.sum", "main.go"], LDFLAGS)}`);
  const binary = join(dir, PUBSUB_EMULATOR_BINARY);
  if (!existsSync(binary)) {
    await buildOnce({
      what: `the Pub/Sub emulator (pstest ${version})`,
      moduleDir,
      dir,
      args: (out) => ["-ldflags", LDFLAGS, "-o", join(out, PUBSUB_EMULATOR_BINARY), "."],
      complete: () => existsSync(binary),
      withoutGo: `Go is not installed, and it is needed once to build the Pub/Sub emulator (pstest ${version}): install Go ≥ 1.25, or set CRDFN_PUBSUB_EMULATOR_HOST to the host:port of a running Pub/Sub emulator`,
      takes: "about a minute",
      staleLockMs: 1800_000,
      pollMs: 2000,
      env,
      log,
    });
  }
  return binary;
}
