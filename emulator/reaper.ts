import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { packageRoot } from "./paths.ts";

/** Handle on the reaper process (see reaper.mjs): tell it what to clean up if we die. */
export interface Reaper {
  trackProcessGroup(pid: number): void;
  forgetProcessGroup(pid: number): void;
  trackDir(dir: string): void;
  /** Closes the reaper's stdin: it ends whatever is still tracked and removes tracked folders. */
  release(): Promise<void>;
}

export function startReaper(): Reaper {
  const child: ChildProcess = spawn(process.execPath, [join(packageRoot, "emulator", "reaper.mjs")], {
    stdio: ["pipe", "ignore", "ignore"],
    detached: true,
  });
  child.unref();
  const stdin = child.stdin!;
  // The reaper must not keep our event loop alive; its pipe closing is its whole signal.
  (stdin as unknown as { unref?: () => void }).unref?.();
  const send = (line: string): void => {
    if (!stdin.destroyed) stdin.write(`${line}\n`);
  };
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  return {
    trackProcessGroup: (pid) => send(`pid ${pid}`),
    forgetProcessGroup: (pid) => send(`forget ${pid}`),
    trackDir: (dir) => send(`dir ${dir}`),
    release: async () => {
      // Waiting for its clean-up must keep us alive, although its running did not.
      child.ref();
      stdin.end();
      await exited;
    },
  };
}

/** A temporary folder for embedded servers, removed by the reaper (with the servers it tracks) should this process die. */
export interface Scratch {
  dir: string;
  reaper: Reaper;
  /** Removes the folder and releases the reaper: once the servers in it have stopped. */
  remove(): Promise<void>;
}

export function startScratch(prefix: string): Scratch {
  const dir = mkdtempSync(join(tmpdir(), `${prefix}-`));
  const reaper = startReaper();
  reaper.trackDir(dir);
  return {
    dir,
    reaper,
    remove: async () => {
      rmSync(dir, { recursive: true, force: true, maxRetries: 3 });
      await reaper.release();
    },
  };
}
