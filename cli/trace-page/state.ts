// Where `crdfn dev --trace` runs its trace viewer: `.crdfn/trace.json` in the state dir, beside
// the kubeconfig and env it writes there (cli/local/state-dir.ts), for `crdfn trace` to read.
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";

export interface TraceState {
  /** The page crdfn serves. */
  page: string;
  /** Jaeger's query API. */
  query: string;
  /** Its OTLP/HTTP receiver (OTEL_EXPORTER_OTLP_ENDPOINT). */
  otlpHttp: string;
  /** Its OTLP/gRPC receiver (host:port), which kube-apiserver exports to. */
  otlpGrpc: string;
}

const traceFile = (stateDir: string): string => join(stateDir, "trace.json");

/** Written while the viewer runs; the returned function removes it (the traces live in the viewer's memory only). */
export function writeTraceState(stateDir: string, state: TraceState): () => void {
  mkdirSync(stateDir, { recursive: true });
  writeFileSync(traceFile(stateDir), `${JSON.stringify(state, null, 2)}\n`);
  return () => rmSync(traceFile(stateDir), { force: true });
}

export function readTraceState(stateDir: string): TraceState | undefined {
  const file = traceFile(stateDir);
  return existsSync(file) ? (JSON.parse(readFileSync(file, "utf8")) as TraceState) : undefined;
}
