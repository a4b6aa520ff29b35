// The AWS Lambda Runtime Interface Emulator (RIE): the Runtime API and invoke endpoint of a Lambda
// container image, built from the pinned module in infra/lambda-rie (go-build.ts, as the control
// plane is) and cached outside the repo by a hash of that pin.
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { SetupError } from "./errors.ts";
import { buildOnce, pinHash } from "./go-build.ts";
import { cacheRoot, packageRoot } from "./paths.ts";

const moduleDir = join(packageRoot, "infra", "lambda-rie");
const MODULE = "github.com/aws/aws-lambda-runtime-interface-emulator";
const LDFLAGS = "-s -w";
export const LAMBDA_RIE_BINARY = "aws-lambda-rie";

/** The RIE version pinned in infra/lambda-rie/go.mod: the one source of truth. */
export function pinnedRieVersion(): string {
  const mod = readFileSync(join(moduleDir, "go.mod"), "utf8");
  const m = /^\s*github\.com\/aws\/aws-lambda-runtime-interface-emulator (v\S+)/m.exec(mod);
  if (!m?.[1]) throw new SetupError(`infra/lambda-rie/go.mod does not pin ${MODULE}`);
  return m[1];
}

export interface LambdaRieOptions {
  env: NodeJS.ProcessEnv;
  log: (line: string) => void;
}

/** Path of the RIE binary: CRDFN_BIN_DIR's when it holds one, else the cached build (built on first use). */
export async function lambdaRieBinary({ env, log }: LambdaRieOptions): Promise<string> {
  if (env.CRDFN_BIN_DIR && existsSync(join(env.CRDFN_BIN_DIR, LAMBDA_RIE_BINARY))) return join(env.CRDFN_BIN_DIR, LAMBDA_RIE_BINARY);
  const version = pinnedRieVersion();
  // The pseudo-version's date and commit make a long name: the commit alone says which.
  const dir = join(cacheRoot(env), "bin", `lambda-rie-${version.split("-").at(-1) ?? version}-${pinHash(moduleDir, ["go.mod", "go.sum"], LDFLAGS)}`);
  const binary = join(dir, LAMBDA_RIE_BINARY);
  if (!existsSync(binary)) {
    await buildOnce({
      what: `the Lambda Runtime Interface Emulator (${version})`,
      moduleDir,
      dir,
      args: (out) => ["-ldflags", LDFLAGS, "-o", join(out, LAMBDA_RIE_BINARY), `${MODULE}/cmd/aws-lambda-rie`],
      complete: () => existsSync(binary),
      withoutGo: `Go is not installed, and it is needed once to build the Lambda Runtime Interface Emulator (${version}): install Go ≥ 1.26.6, or set CRDFN_BIN_DIR to a folder holding ${LAMBDA_RIE_BINARY}`,
      takes: "under a minute",
      staleLockMs: 1800_000,
      pollMs: 2000,
      env,
      log,
    });
  }
  return binary;
}
