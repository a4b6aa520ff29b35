import { existsSync, readFileSync } from "node:fs";
import { homedir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/**
 * Root of the crdfn package (where infra/ lives), independent of the caller's cwd: the
 * checkout when run from sources, node_modules/crdfn when installed (code then runs from dist/).
 */
export const packageRoot = ((): string => {
  for (let dir = dirname(fileURLToPath(import.meta.url)); ; dir = dirname(dir)) {
    const manifest = join(dir, "package.json");
    if (existsSync(manifest) && (JSON.parse(readFileSync(manifest, "utf8")) as { name?: string }).name === "crdfn") return dir;
    if (dirname(dir) === dir) throw new Error("crdfn: cannot find its own package.json");
  }
})();

/** The package's version, for `crdfn --version` and the generated manifests. */
export const packageVersion = (JSON.parse(readFileSync(join(packageRoot, "package.json"), "utf8")) as { version: string }).version;

/** Built binaries and resolved classpaths live outside the repo, so a fresh clone reuses them. */
export function cacheRoot(env: NodeJS.ProcessEnv): string {
  if (env.CRDFN_CACHE_DIR) return env.CRDFN_CACHE_DIR;
  return join(env.XDG_CACHE_HOME ?? join(homedir(), ".cache"), "crdfn");
}
