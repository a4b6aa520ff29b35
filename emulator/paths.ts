import { homedir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/** Root of the crdfn checkout (where infra/ lives), independent of the caller's cwd. */
export const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), "..");

/** Built binaries and resolved classpaths live outside the repo, so a fresh clone reuses them. */
export function cacheRoot(env: NodeJS.ProcessEnv): string {
  if (env.CRDFN_CACHE_DIR) return env.CRDFN_CACHE_DIR;
  return join(env.XDG_CACHE_HOME ?? join(homedir(), ".cache"), "crdfn");
}
