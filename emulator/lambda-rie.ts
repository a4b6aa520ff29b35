// The AWS Lambda Runtime Interface Emulator (RIE): the Runtime API and invoke endpoint of a Lambda
// container image, built from the pinned module in infra/lambda-rie (go-build.ts, as the control
// plane is) and cached outside the repo by a hash of that pin.
import { join } from "node:path";
import { pinnedBinary, pinnedModuleVersion } from "./go-build.ts";
import { packageRoot } from "./paths.ts";

const moduleDir = join(packageRoot, "infra", "lambda-rie");
const MODULE = "github.com/aws/aws-lambda-runtime-interface-emulator";
export const LAMBDA_RIE_BINARY = "aws-lambda-rie";

/** The RIE version pinned in infra/lambda-rie/go.mod. */
export const pinnedRieVersion = (): string => pinnedModuleVersion(moduleDir, /^\s*github\.com\/aws\/aws-lambda-runtime-interface-emulator (v\S+)/m, MODULE);

/** Path of the RIE binary: CRDFN_BIN_DIR's when it holds one, else the cached build (built on first use). */
export function lambdaRieBinary(o: { env: NodeJS.ProcessEnv; log: (line: string) => void }): Promise<string> {
  const version = pinnedRieVersion();
  return pinnedBinary(
    {
      binary: LAMBDA_RIE_BINARY,
      moduleDir,
      // The pseudo-version's date and commit make a long name: the commit alone says which.
      cacheName: `lambda-rie-${version.split("-").at(-1) ?? version}`,
      pinFiles: ["go.mod", "go.sum"],
      pkg: `${MODULE}/cmd/aws-lambda-rie`,
      what: `the Lambda Runtime Interface Emulator (${version})`,
      withoutGo: `Go is not installed, and it is needed once to build the Lambda Runtime Interface Emulator (${version}): install Go ≥ 1.26.6, or set CRDFN_BIN_DIR to a folder holding ${LAMBDA_RIE_BINARY}`,
      takes: "under a minute",
    },
    o,
  );
}
