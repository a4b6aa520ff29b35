// The runtime's metrics as Prometheus series (prom-client), for a process that serves /metrics.
import { Counter, Histogram, type Registry } from "prom-client";
import { METRIC, resultOf, type RuntimeMetrics } from "./metrics.ts";

/** controller-runtime's buckets for reconcile_time_seconds. */
const RECONCILE_TIME_BUCKETS = [
  0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8,
  9, 10, 15, 20, 25, 30, 40, 50, 60,
];

/**
 * Idempotent per registry: several operators and clusters in one process share the metric
 * families; each call's observations carry its `cluster` label.
 */
export function createRuntimeMetrics(registry: Registry, cluster = "default"): RuntimeMetrics {
  const get = <T>(name: string, make: (name: string) => T): T => (registry.getSingleMetric(name) as T | undefined) ?? make(name);
  const perController = ["cluster", "controller"];
  const total = get(
    METRIC.reconcileTotal,
    (name) => new Counter({ name, help: "Total number of reconciliations per controller", labelNames: [...perController, "result"], registers: [registry] }),
  );
  const errors = get(
    METRIC.reconcileErrors,
    (name) => new Counter({ name, help: "Total number of reconciliation errors per controller", labelNames: perController, registers: [registry] }),
  );
  const terminal = get(
    METRIC.terminalErrors,
    (name) => new Counter({ name, help: "Total number of terminal reconciliation errors per controller", labelNames: perController, registers: [registry] }),
  );
  const time = get(
    METRIC.reconcileTime,
    (name) =>
      new Histogram({
        name,
        help: "Length of time per reconciliation per controller",
        labelNames: perController,
        buckets: RECONCILE_TIME_BUCKETS,
        registers: [registry],
      }),
  );
  const calls = get(
    METRIC.apiCalls,
    (name) =>
      new Histogram({
        name,
        help: "Kubernetes API calls made while handling one key event",
        labelNames: perController,
        buckets: [1, 2, 3, 4, 5, 6, 8, 10, 15, 20],
        registers: [registry],
      }),
  );
  const lag = get(
    METRIC.eventLag,
    (name) =>
      new Histogram({
        name,
        help: "From the bridge observing a change to its reconcile finishing",
        labelNames: perController,
        buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900],
        registers: [registry],
      }),
  );
  const earlier = get(
    METRIC.earlierIncarnation,
    (name) =>
      new Counter({ name, help: "Key events of an object deleted and re-created since, left undone", labelNames: perController, registers: [registry] }),
  );
  const seen = new Set<string>();
  return {
    observe(m) {
      const labels = { cluster, controller: m.controller };
      if (!seen.has(m.controller)) {
        // Like controller-runtime: every series exists from the first reconcile, so rate() works.
        seen.add(m.controller);
        for (const result of ["success", "error", "requeue", "requeue_after"]) total.inc({ ...labels, result }, 0);
        errors.inc(labels, 0);
        terminal.inc(labels, 0);
        earlier.inc(labels, 0);
      }
      const r = resultOf(m.outcome);
      total.inc({ ...labels, result: r.result });
      if (r.error) errors.inc(labels);
      if (r.terminal) terminal.inc(labels);
      if (m.outcome.result === "success" && m.outcome.earlierIncarnation) earlier.inc(labels);
      time.observe(labels, m.seconds);
      calls.observe(labels, m.apiCalls);
      if (m.lagSeconds !== undefined) lag.observe(labels, m.lagSeconds);
    },
  };
}
