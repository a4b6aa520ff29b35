// Prometheus metrics of the runtime: outcomes, API calls per reconcile (the number that shows
// whether steady state stays at ≤ 3 calls), duration, and queue lag from the bridge's observedAt.
import { Counter, Histogram, type Registry } from "prom-client";

export interface RuntimeMetrics {
  observe(o: { kind: string; result: string; apiCalls: number; seconds: number; lagSeconds?: number }): void;
}

/**
 * Idempotent per registry: several operators and clusters in one process share the metric
 * families; each call's observations carry its `cluster` label.
 */
export function createRuntimeMetrics(registry: Registry, cluster = "default"): RuntimeMetrics {
  const get = <T>(name: string, make: () => T): T => (registry.getSingleMetric(name) as T | undefined) ?? make();
  const outcomes = get("crdfn_reconcile_total", () => new Counter({ name: "crdfn_reconcile_total", help: "Handled key events by outcome", labelNames: ["cluster", "kind", "result"], registers: [registry] }));
  const calls = get("crdfn_reconcile_api_calls", () => new Histogram({ name: "crdfn_reconcile_api_calls", help: "Kubernetes API calls made while handling one key event", labelNames: ["cluster", "kind"], buckets: [1, 2, 3, 4, 5, 6, 8, 10, 15, 20], registers: [registry] }));
  const duration = get("crdfn_reconcile_duration_seconds", () => new Histogram({ name: "crdfn_reconcile_duration_seconds", help: "Time to handle one key event", labelNames: ["cluster", "kind"], registers: [registry] }));
  const lag = get("crdfn_event_lag_seconds", () => new Histogram({ name: "crdfn_event_lag_seconds", help: "From the bridge observing a change to its reconcile finishing", labelNames: ["cluster", "kind"], buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900], registers: [registry] }));
  return {
    observe(o) {
      const labels = { cluster, kind: o.kind };
      outcomes.inc({ ...labels, result: o.result });
      calls.observe(labels, o.apiCalls);
      duration.observe(labels, o.seconds);
      if (o.lagSeconds !== undefined) lag.observe(labels, o.lagSeconds);
    },
  };
}
