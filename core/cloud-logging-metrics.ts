// The line a Cloud Run function writes per reconcile (functions/adapters/cloud-logging.ts) and
// the log-based metrics that read it (deploy/gcp.ts): one contract, so the two never
// disagree. Metric names are controller-runtime's (functions/runtime/metrics.ts says why).

/** jsonPayload.<field> = <value> marks a reconcile's line. */
export const METRIC_MARKER = { field: "crdfnMetric", value: "reconcile" } as const;

/** Labels every reconcile line carries (jsonPayload.<label>). */
export const METRIC_LABELS = ["cluster", "controller", "result"] as const;

/** A failure counter's labels: a failure has no result label to split by. */
const PER_CONTROLLER = METRIC_LABELS.filter((l) => l !== "result");

/** Counters: one per line matching the condition. */
export const LOG_COUNTERS = [
  { name: "controller_runtime_reconcile_total", description: "Reconciles by result", condition: "", labels: METRIC_LABELS },
  {
    name: "controller_runtime_reconcile_errors_total",
    description: "Failed reconciles",
    condition: "jsonPayload.error=true",
    labels: PER_CONTROLLER,
  },
  {
    name: "controller_runtime_terminal_reconcile_errors_total",
    description: "Failures not retried",
    condition: "jsonPayload.terminal=true",
    labels: PER_CONTROLLER,
  },
] as const;

/** Distributions: the value of a line's field. */
export const LOG_DISTRIBUTIONS = [
  { name: "controller_runtime_reconcile_time_seconds", description: "Time per reconcile", field: "reconcileTimeSeconds", unit: "s" },
  { name: "crdfn_reconcile_api_calls", description: "API calls per reconcile", field: "apiCalls", unit: "1" },
  { name: "crdfn_event_lag_seconds", description: "From the bridge seeing a change to its reconcile finishing", field: "eventLagSeconds", unit: "s" },
] as const;
