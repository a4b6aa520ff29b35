// Jaeger v2, the trace viewer `crdfn dev --trace` runs: its OTLP receivers (gRPC for
// kube-apiserver, which exports over gRPC only; HTTP for the bridge and functions) and its query
// API, built once from the pinned module in infra/jaeger (go-build.ts, as the control plane is).
import { writeFileSync } from "node:fs";
import { connect } from "node:net";
import { join } from "node:path";
import { withSetupDefaults, type BinaryOptions } from "./binaries.ts";
import { pinnedBinary, pinnedModuleVersion } from "./go-build.ts";
import { packageRoot } from "./paths.ts";
import { freePort } from "./ports.ts";
import { startEmbedded, startServer } from "./process.ts";

const moduleDir = join(packageRoot, "infra", "jaeger");
const MODULE = "github.com/jaegertracing/jaeger";
export const JAEGER_BINARY = "jaeger";

/** The Jaeger release pinned in infra/jaeger/go.mod. */
export const pinnedJaegerVersion = (): string => pinnedModuleVersion(moduleDir, /^\s*github\.com\/jaegertracing\/jaeger (v\d+\.\d+\.\d+)/m, MODULE);

/** Path of the Jaeger binary: CRDFN_BIN_DIR's when it holds one, else the cached build (built on first use). */
export function jaegerBinary(o: BinaryOptions): Promise<string> {
  const version = pinnedJaegerVersion();
  return pinnedBinary(
    {
      binary: JAEGER_BINARY,
      moduleDir,
      cacheName: `jaeger-${version}`,
      pinFiles: ["go.mod", "go.sum"],
      pkg: `${MODULE}/cmd/jaeger`,
      what: `the Jaeger trace viewer (${version})`,
      withoutGo: `Go is not installed, and it is needed once to build the Jaeger trace viewer (${version}) for --trace: install Go ≥ 1.26.6, or set CRDFN_BIN_DIR to a folder holding ${JAEGER_BINARY}`,
      takes: "4–15 min on 2 cores",
    },
    o,
  );
}

/** Where a running Jaeger receives and answers. */
export interface JaegerEndpoints {
  /** OTLP/HTTP base URL (OTEL_EXPORTER_OTLP_ENDPOINT): the bridge and the functions. */
  otlpHttp: string;
  /** OTLP/gRPC host:port: kube-apiserver, whose tracing exports over gRPC only. */
  otlpGrpc: string;
  /** The query API's base URL (/api/services, /api/traces…). */
  query: string;
}

export interface LocalJaeger extends JaegerEndpoints {
  stop(): Promise<void>;
}

/**
 * Jaeger v2's configuration (an OpenTelemetry Collector distribution; the shape of cmd/jaeger's
 * config.yaml at v1.76.0, cut to what a trace viewer needs): OTLP in, memory storage, the query
 * API, every port given (two of them on one machine, as parallel tests run them). Its own
 * metrics are off: their reader would take the fixed port 8888.
 */
export function jaegerConfig(p: { otlpGrpc: number; otlpHttp: number; queryHttp: number; queryGrpc: number; maxTraces?: number }): string {
  return `service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  jaeger_query:
    storage:
      traces: memstore
    http:
      endpoint: 127.0.0.1:${p.queryHttp}
    grpc:
      endpoint: 127.0.0.1:${p.queryGrpc}
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: ${p.maxTraces ?? 100000}
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:${p.otlpGrpc}
      http:
        endpoint: 127.0.0.1:${p.otlpHttp}
processors:
  batch:
    # A change is looked at seconds after it happened, not after the default 200 ms batches pile up.
    timeout: 100ms
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
`;
}

const listening = (port: number): Promise<boolean> =>
  new Promise((resolve) => {
    const socket = connect(port, "127.0.0.1");
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(false));
  });

/** Builds (first use only) and starts Jaeger on free loopback ports, in a scratch folder of its own. */
export async function startJaeger(opts: Partial<BinaryOptions> = {}): Promise<LocalJaeger> {
  const o = withSetupDefaults(opts);
  const binary = await jaegerBinary(o);
  const [otlpGrpc, otlpHttp, queryGrpc] = await Promise.all([freePort(), freePort(), freePort()]);
  const embedded = await startEmbedded("crdfn-jaeger", async ({ dir, port: queryHttp, reaper }) => {
    const config = join(dir, "jaeger.yaml");
    writeFileSync(config, jaegerConfig({ otlpGrpc, otlpHttp, queryHttp, queryGrpc }));
    return startServer(
      {
        name: "jaeger",
        command: binary,
        args: [`--config=${config}`],
        logFile: join(dir, "jaeger.log"),
        ready: async () =>
          (await fetch(`http://127.0.0.1:${queryHttp}/api/services`, { signal: AbortSignal.timeout(2000) })).ok &&
          (await listening(otlpHttp)) &&
          (await listening(otlpGrpc)),
      },
      reaper,
    );
  });
  return {
    otlpHttp: `http://127.0.0.1:${otlpHttp}`,
    otlpGrpc: `127.0.0.1:${otlpGrpc}`,
    query: `http://127.0.0.1:${embedded.port}`,
    stop: embedded.stop,
  };
}
