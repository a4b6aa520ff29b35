import { spawn, type ChildProcess } from "node:child_process";
import { closeSync, openSync, readFileSync, statSync } from "node:fs";
import { freePort } from "./ports.ts";
import { startScratch, type Reaper } from "./reaper.ts";
import { SetupError } from "./errors.ts";

export interface ServerSpec {
  name: string;
  command: string;
  args: string[];
  logFile: string;
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  /** Resolves true once the server answers; polled for as long as the server makes progress. */
  ready: () => Promise<boolean>;
  /**
   * How long the server may go without progress while it starts (its log not growing, its
   * process using no CPU) before it is given up. Default START_STALL_MS. Not a bound on the start
   * itself: a loaded machine starts a server slowly, not never.
   */
  stallMs?: number;
  /** A bound on the whole start, progress or not, for a caller that needs one (a benchmark's); none by default. */
  timeoutMs?: number;
}

/**
 * A starting server that neither writes to its log nor uses CPU for this long is stuck (a JVM or
 * a kube-apiserver starting at a load of 40 still does one or the other every few seconds).
 */
export const START_STALL_MS = 120_000;

/** CPU time a process and its waited-for children used, in clock ticks (Linux's /proc); undefined elsewhere. */
function cpuTicks(pid: number): number | undefined {
  try {
    // After the command's name in parentheses (which may hold spaces): utime stime cutime cstime are fields 14–17.
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return fields.slice(11, 15).reduce((sum, f) => sum + Number(f), 0);
  } catch {
    return undefined;
  }
}

/** What changes while a starting server makes progress: its log's size and its CPU time. */
function progressMark(pid: number, logFile: string): string {
  let size = -1;
  try {
    size = statSync(logFile).size;
  } catch {
    // Not written yet.
  }
  return `${size}/${cpuTicks(pid) ?? "?"}`;
}

export interface RunningServer {
  name: string;
  readonly pid: number;
  logFile: string;
  /** SIGTERM, then SIGKILL after `graceMs` (0: SIGKILL at once). Resolves when the process is gone. */
  stop(graceMs?: number): Promise<void>;
  /** Resolves when the process is gone, however it ended: its exit code or the signal that ended it. */
  readonly exited: Promise<number | string>;
  /** Sends a signal to its process group (SIGSTOP and SIGCONT: a hung server, for outage tests). */
  signal(sig: NodeJS.Signals): void;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** The last lines of a server's log, to show when it fails to start. */
export function logTail(file: string, lines = 30): string {
  try {
    return readFileSync(file, "utf8").trimEnd().split("\n").slice(-lines).join("\n");
  } catch {
    return "(no log written)";
  }
}

/**
 * Starts a server in its own process group (so the reaper can end it and its children),
 * logging to a file, and waits until it answers, for as long as it makes progress. A server that
 * exits, or makes no progress for `stallMs`, fails with the tail of its log.
 */
export async function startServer(spec: ServerSpec, reaper: Reaper): Promise<RunningServer> {
  const log = openSync(spec.logFile, "a");
  let child: ChildProcess;
  try {
    child = spawn(spec.command, spec.args, {
      cwd: spec.cwd,
      env: spec.env ?? process.env,
      stdio: ["ignore", log, log],
      detached: true,
    });
  } finally {
    closeSync(log);
  }
  const spawnError = new Promise<Error>((resolve) => child.once("error", resolve));
  const exited = new Promise<number | string>((resolve) => child.once("exit", (code, sig) => resolve(code ?? sig ?? "?")));
  const pid = await Promise.race([
    new Promise<number>((resolve) => child.once("spawn", () => resolve(child.pid!))),
    spawnError.then((e) => {
      throw new SetupError(`could not start ${spec.name} (${spec.command}): ${e.message}`);
    }),
  ]);
  reaper.trackProcessGroup(pid);
  let gone = false;
  void exited.then(() => {
    gone = true;
    reaper.forgetProcessGroup(pid);
  });

  const stop = async (graceMs = 10_000): Promise<void> => {
    if (gone) return;
    try {
      // graceMs 0: SIGKILL at once (a crash, for outage tests).
      process.kill(-pid, graceMs === 0 ? "SIGKILL" : "SIGTERM");
    } catch {
      return;
    }
    const escalate = setTimeout(() => {
      if (!gone) process.kill(-pid, "SIGKILL");
    }, graceMs);
    await exited;
    clearTimeout(escalate);
  };

  const stallMs = spec.stallMs ?? START_STALL_MS;
  let mark = progressMark(pid, spec.logFile);
  const started = Date.now();
  let since = started;
  for (;;) {
    if (gone) {
      const code = await exited;
      throw new SetupError(`${spec.name} exited (${code}) while starting; last lines of ${spec.logFile}:\n${logTail(spec.logFile)}`);
    }
    if (await spec.ready().catch(() => false)) break;
    if (spec.timeoutMs !== undefined && Date.now() - started > spec.timeoutMs) {
      await stop(1000);
      throw new SetupError(`${spec.name} did not become ready within ${spec.timeoutMs / 1000}s; last lines of ${spec.logFile}:\n${logTail(spec.logFile)}`);
    }
    const now = progressMark(pid, spec.logFile);
    if (now !== mark) [mark, since] = [now, Date.now()];
    else if (Date.now() - since > stallMs) {
      await stop(1000);
      throw new SetupError(
        `${spec.name} made no progress for ${Math.round(stallMs / 1000)}s while starting (alive, but its log and CPU time unchanged, and not answering); last lines of ${spec.logFile}:\n${logTail(spec.logFile)}`,
      );
    }
    await sleep(100);
  }
  const signal = (sig: NodeJS.Signals): void => {
    if (!gone) process.kill(-pid, sig);
  };
  return { name: spec.name, pid, logFile: spec.logFile, stop, exited, signal };
}

/** A server of its own in a scratch folder, on a free port. */
export interface EmbeddedServer {
  port: number;
  server: RunningServer;
  /** Stops the server and removes its folder; once, however often called. */
  stop: () => Promise<void>;
}

/** Starts one server with `start`; a start that fails leaves nothing behind. */
export async function startEmbedded(
  prefix: string,
  start: (at: { dir: string; port: number; reaper: Reaper }) => Promise<RunningServer>,
): Promise<EmbeddedServer> {
  const scratch = startScratch(prefix);
  let server: RunningServer | undefined;
  let stopped: Promise<void> | undefined;
  const stop = () =>
    (stopped ??= (async () => {
      await server?.stop();
      await scratch.remove();
    })());
  try {
    const port = await freePort();
    server = await start({ dir: scratch.dir, port, reaper: scratch.reaper });
    return { port, server, stop };
  } catch (e) {
    await stop();
    throw e;
  }
}
