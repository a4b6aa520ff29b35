// The Pub/Sub emulator binary: the fake of Google's Go client (pstest), served by the pinned
// wrapper module in infra/pubsub, built once with `go build` from the Go module proxy and
// cached outside the repo by a hash of that pin (go-build.ts, as the control plane is).
import { join } from "node:path";
import type { BinaryOptions } from "./binaries.ts";
import { pinnedBinary, pinnedModuleVersion } from "./go-build.ts";
import { packageRoot } from "./paths.ts";

const moduleDir = join(packageRoot, "infra", "pubsub");
export const PUBSUB_EMULATOR_BINARY = "pubsub-emulator";

/** The pstest release pinned in infra/pubsub/go.mod. */
export const pinnedPstestVersion = (): string =>
  pinnedModuleVersion(moduleDir, /^\s*(?:require\s+)?cloud\.google\.com\/go\/pubsub\/v2 (v\d+\.\d+\.\d+)/m, "cloud.google.com/go/pubsub/v2");

/** Path of the emulator binary: CRDFN_BIN_DIR's when it holds one, else the cached build (built on first use). */
export function pubSubEmulatorBinary(o: BinaryOptions): Promise<string> {
  const version = pinnedPstestVersion();
  return pinnedBinary(
    {
      binary: PUBSUB_EMULATOR_BINARY,
      moduleDir,
      cacheName: `pubsub-emulator-${version}`,
      pinFiles: ["go.mod", "go.sum", "main.go"],
      pkg: ".",
      what: `the Pub/Sub emulator (pstest ${version})`,
      withoutGo: `Go is not installed, and it is needed once to build the Pub/Sub emulator (pstest ${version}): install Go ≥ 1.25, or set CRDFN_PUBSUB_EMULATOR_HOST to the host:port of a running Pub/Sub emulator`,
      takes: "about a minute",
    },
    o,
  );
}
