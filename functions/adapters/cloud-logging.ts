// Logs and metrics of a Cloud Run function, as Cloud Logging's structured JSON: one JSON object
// per line on stdout, with `severity` and `message` (docs.cloud.google.com/logging/docs/structured-logging).
// Metrics are one such line per reconcile, turned into Cloud Monitoring metrics by the log-based
// metrics `crdfn generate` writes (deploy/gcp.ts), under controller-runtime's names.
//
// Why logs and not OpenTelemetry: like EMF on Lambda, nothing is sent from the request path and
// nothing is added to the cold start (no exporter, no SDK, no collector or sidecar); Cloud Run
// ships stdout to Cloud Logging by itself, and log-based metrics need no further permission of
// the function's service account. The cost is Cloud Logging's ingestion of one line per reconcile.
import { pino, type Logger } from "pino";
import { LOG_DISTRIBUTIONS, METRIC_MARKER } from "../../core/cloud-logging-metrics.ts";
import { METRIC, resultOf, type RuntimeMetrics } from "../runtime/metrics.ts";

const field = (metric: string): string => LOG_DISTRIBUTIONS.find((d) => d.name === metric)?.field ?? metric;

/** pino's levels as Cloud Logging's LogSeverity names them. */
const SEVERITY: Record<string, string> = { trace: "DEBUG", debug: "DEBUG", info: "INFO", warn: "WARNING", error: "ERROR", fatal: "CRITICAL" };

/** A pino logger whose lines Cloud Logging reads: `severity` for the level, `message` for the text. */
export function cloudLoggingLogger(level: string, destination?: pino.DestinationStream): Logger {
  const options: pino.LoggerOptions = {
    level,
    messageKey: "message",
    base: undefined,
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label) => ({ severity: SEVERITY[label] ?? "DEFAULT" }) },
  };
  return destination ? pino(options, destination) : pino(options);
}

/** Metrics of one cluster's runtimes: a structured line per reconcile, through `write`. */
export function cloudLoggingMetrics(cluster: string, write: (line: string) => void): RuntimeMetrics {
  return {
    observe(m) {
      const r = resultOf(m.outcome);
      write(
        JSON.stringify({
          severity: r.error ? "WARNING" : "INFO",
          message: `reconcile ${r.result}`,
          [METRIC_MARKER.field]: METRIC_MARKER.value,
          cluster,
          controller: m.controller,
          result: r.result,
          error: r.error,
          terminal: r.terminal,
          [field(METRIC.reconcileTime)]: m.seconds,
          [field(METRIC.apiCalls)]: m.apiCalls,
          ...(m.lagSeconds === undefined ? {} : { [field(METRIC.eventLag)]: m.lagSeconds }),
        }) + "\n",
      );
    },
  };
}
