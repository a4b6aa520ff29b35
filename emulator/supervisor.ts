// `crdfn dev` and `crdfn cluster up` keep their servers up as a kubelet keeps a static pod: a
// server that exits on its own (a crash, an OOM kill, kill -9) is started again the same way (same
// ports, same data dir: what it held survives), with one line saying so. A crash loop backs off
// (at once, then 1 s, doubling up to a minute), and a server that ran a minute since its last start
// counts as healthy again. A stop asked for (Ctrl-C) stops it for good: no restart.
import { setTimeout as delay } from "node:timers/promises";
import type { RunningServer } from "./process.ts";

export interface SuperviseOptions {
  /** One line per crash and per failed restart. */
  say: (line: string) => void;
  /** Milliseconds since some origin. Default Date.now. */
  now?: () => number;
  /** Waits `ms` unless `signal` aborts first. Default node:timers/promises' setTimeout. */
  wait?: (ms: number, signal: AbortSignal) => Promise<void>;
}

/** The first restart of a crash loop is at once; the next ones wait this long, doubling. */
const FIRST_BACKOFF_MS = 1000;
const MAX_BACKOFF_MS = 60_000;
/** A server up this long since its last start is no longer in a crash loop. */
const HEALTHY_AFTER_MS = 60_000;

/** The wait before the `crashes`-th restart in a row: none for the first. */
const backoffMs = (crashes: number): number => (crashes <= 1 ? 0 : Math.min(MAX_BACKOFF_MS, FIRST_BACKOFF_MS * 2 ** (crashes - 2)));

const defaultWait = (ms: number, signal: AbortSignal): Promise<void> => delay(ms, undefined, { signal }).catch(() => undefined);

/**
 * Keeps `first` (started by `start`) running: each time its process ends without stop() having
 * been asked, `start` runs again. The handle is the server's: its pid and signal() are the
 * current process's, stop() ends supervision and the process, `exited` resolves after stop().
 */
export function supervise(first: RunningServer, start: () => Promise<RunningServer>, o: SuperviseOptions): RunningServer {
  const now = o.now ?? Date.now;
  const wait = o.wait ?? defaultWait;
  const stopping = new AbortController();
  let current = first;
  let startedAt = now();
  let crashes = 0; // in a row, without a healthy minute between them
  let restarting: Promise<void> = Promise.resolve();
  let ended: () => void = () => undefined;
  const exited = new Promise<number | string>((resolve) => (ended = () => resolve("stopped")));

  const keep = async (server: RunningServer): Promise<void> => {
    const code = await server.exited;
    if (stopping.signal.aborted) return;
    if (now() - startedAt >= HEALTHY_AFTER_MS) crashes = 0;
    const loop = crashes > 0 ? ` (crash ${crashes + 1} in a row: in ${Math.round(backoffMs(crashes + 1) / 1000)}s)` : "";
    o.say(`${server.name} exited (${code}); restarting it${loop} on the same ports and data; its log: ${server.logFile}`);
    for (;;) {
      const waitMs = backoffMs(++crashes);
      if (waitMs > 0) await wait(waitMs, stopping.signal);
      if (stopping.signal.aborted) return;
      try {
        const next = await start();
        if (stopping.signal.aborted) return await next.stop();
        current = next;
        startedAt = now();
        restarting = keep(next);
        return;
      } catch (e) {
        o.say(`${server.name} could not be restarted (${(e as Error).message.split("\n")[0]}); trying again in ${Math.round(backoffMs(crashes + 1) / 1000)}s`);
      }
    }
  };
  restarting = keep(first);

  return {
    name: first.name,
    get pid() {
      return current.pid;
    },
    get logFile() {
      return current.logFile;
    },
    exited,
    signal: (sig) => current.signal(sig),
    stop: async (graceMs) => {
      stopping.abort();
      // The process first: the watcher of a live one waits for its exit.
      await current.stop(graceMs);
      await restarting;
      ended();
    },
  };
}
