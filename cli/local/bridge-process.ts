// The bridge as its image runs it, in a process of its own so that its memory and CPU can be
// measured apart (the benchmarks): the bundle (cli/bundle.ts) under the deployment's
// NODE_OPTIONS, its settings in a file as the generated ConfigMap holds them, and ready when its
// /readyz says the initial sync is done.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { stringify } from "yaml";
import { BRIDGE_NODE_OPTIONS } from "../../deploy/bridge.ts";
import { freePort } from "../../emulator/ports.ts";
import { startServer, type RunningServer } from "../../emulator/process.ts";
import { startReaper } from "../../emulator/reaper.ts";
import { bundleBridge } from "../bundle.ts";

/** A bridge running as its own process, answering /healthz, /readyz and /metrics on `httpPort`. */
export interface BridgeProcess {
  pid: number;
  httpPort: number;
  logFile: string;
}

export interface BridgeProcessOptions {
  /** The bridge's settings file (what the generated ConfigMap holds). */
  settings: Record<string, unknown>;
  /** What points it at the cluster and the queue, over this process's environment. */
  env: Record<string, string>;
  /** CRDFN_LOG_LEVEL. */
  logLevel: string;
  /** Node flags added after the deployment's NODE_OPTIONS (the cold-start benchmark's `--cpu-prof`). */
  extraNodeOptions?: string;
  /** How long it may go without progress (its log, its CPU time) before /readyz answers. Default emulator/process.ts's START_STALL_MS. */
  readyTimeoutMs?: number;
}

/** Bundles and starts the bridge, and waits for its /readyz; its folder is reaped if this process dies. */
export async function spawnBridge(o: BridgeProcessOptions): Promise<BridgeProcess & { stop(): Promise<void> }> {
  const dir = mkdtempSync(join(tmpdir(), "crdfn-bridge-"));
  const reaper = startReaper();
  reaper.trackDir(dir);
  const entry = join(dir, "bridge.mjs");
  const httpPort = await freePort();
  const logFile = join(dir, "bridge.log");
  const configFile = join(dir, "bridge.yaml");
  writeFileSync(configFile, stringify(o.settings));
  let server: RunningServer;
  try {
    await bundleBridge(entry);
    server = await startServer(
      {
        name: "crdfn bridge",
        command: process.execPath,
        args: [entry],
        logFile,
        env: {
          ...process.env,
          ...o.env,
          CRDFN_CONFIG_FILE: configFile,
          CRDFN_HTTP_PORT: String(httpPort),
          CRDFN_LOG_LEVEL: o.logLevel,
          NODE_OPTIONS: o.extraNodeOptions ? `${BRIDGE_NODE_OPTIONS} ${o.extraNodeOptions}` : BRIDGE_NODE_OPTIONS,
        },
        ready: async () => (await fetch(`http://127.0.0.1:${httpPort}/readyz`)).ok,
        ...(o.readyTimeoutMs === undefined ? {} : { stallMs: o.readyTimeoutMs }),
      },
      reaper,
    );
  } catch (e) {
    await reaper.release();
    throw e;
  }
  return {
    pid: server.pid,
    httpPort,
    logFile,
    async stop() {
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
      await reaper.release();
    },
  };
}
