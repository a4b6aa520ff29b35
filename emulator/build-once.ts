// Something built once per machine into a cache folder (a Go binary from the module proxy, an npm
// package with a native part): serialized across processes (parallel test files, a CLI beside a
// test run) by a lock folder, and never half-built: the build goes into a temporary folder,
// renamed into place when it succeeds.
import { mkdirSync, renameSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";

export interface CachedBuild {
  /** What is built, in words: "the control plane". */
  what: string;
  /** The cache folder it ends up in. */
  dir: string;
  /** Whether `dir` already holds everything (another process may have built it meanwhile). */
  complete: () => boolean;
  /** A lock older than this belongs to a build that was killed. */
  staleLockMs: number;
  /** How often a waiting process looks again. */
  pollMs: number;
  log: (line: string) => void;
  /** Builds into `tmp` (an empty folder); throws (and `tmp` is removed) when it fails. */
  build: (tmp: string) => Promise<void>;
}

/** What a lock needs: the folder it guards and how to tell that another process finished it. */
export type BuildLock = Omit<CachedBuild, "build">;

/**
 * Runs `work` while holding `dir`'s lock folder, unless `dir` is (or, while waiting for another
 * process's lock, becomes) complete. For a build that cannot be renamed into place (a Python venv
 * names its own absolute path), `work` builds in `dir` itself and marks it complete last.
 */
export async function withBuildLock(b: BuildLock, work: () => Promise<void>): Promise<void> {
  mkdirSync(join(b.dir, ".."), { recursive: true });
  const lock = `${b.dir}.lock`;
  for (;;) {
    try {
      mkdirSync(lock);
      break;
    } catch {
      const held = statSync(lock, { throwIfNoEntry: false });
      if (held && Date.now() - held.mtimeMs > b.staleLockMs) rmSync(lock, { recursive: true, force: true });
      b.log(`waiting for another process that is building ${b.what}…`);
      await new Promise((r) => setTimeout(r, b.pollMs));
      if (b.complete()) return;
    }
  }
  try {
    if (!b.complete()) await work();
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
}

/** Builds into a temporary folder under the lock, renamed to `dir` when it succeeds. */
export async function buildOnceInto(b: CachedBuild): Promise<void> {
  await withBuildLock(b, async () => {
    const tmp = `${b.dir}.tmp-${process.pid}`;
    rmSync(tmp, { recursive: true, force: true });
    mkdirSync(tmp, { recursive: true });
    try {
      await b.build(tmp);
    } catch (e) {
      rmSync(tmp, { recursive: true, force: true });
      throw e;
    }
    rmSync(b.dir, { recursive: true, force: true });
    renameSync(tmp, b.dir);
  });
}
