// The runtime's measurements, named as controller-runtime names them (pkg/internal/controller/
// metrics/metrics.go) so dashboards and alerts written for kubebuilder operators apply, plus three
// of crdfn's own: API calls per reconcile (whether steady state stays at ≤ 3 calls), queue lag
// from the bridge's observedAt, and events of an earlier incarnation of their object. Prometheus
// in prometheus-metrics.ts (the local poller, Cloud Run), EMF on Lambda (emf-metrics.ts): this
// file loads neither, so a Lambda bundle carries no prom-client.
import type { Outcome } from "./outcome.ts";

export interface Measurement {
  /** controller-runtime's controller name: the lower-cased kind (builder's default). */
  controller: string;
  outcome: Outcome;
  apiCalls: number;
  seconds: number;
  lagSeconds?: number;
}

export interface RuntimeMetrics {
  observe(m: Measurement): void;
}

export const METRIC = {
  reconcileTotal: "controller_runtime_reconcile_total",
  reconcileErrors: "controller_runtime_reconcile_errors_total",
  terminalErrors: "controller_runtime_terminal_reconcile_errors_total",
  reconcileTime: "controller_runtime_reconcile_time_seconds",
  apiCalls: "crdfn_reconcile_api_calls",
  eventLag: "crdfn_event_lag_seconds",
  /** Events whose object was deleted and re-created since: nothing done (functions/runtime/runtime.ts earlierIncarnation). */
  earlierIncarnation: "crdfn_earlier_incarnation_events_total",
} as const;

export type ReconcileResultLabel = "success" | "error" | "requeue" | "requeue_after";

/**
 * An outcome in controller-runtime's terms. Every failure is an `error` (TemporaryError too: like a
 * returned error, it is retried later); failures that are not retried are also terminal (a
 * PermanentError or refusal, like reconcile.TerminalError, and a message that can never be handled).
 * (`requeue`, controller-runtime's Requeue without a delay, has no crdfn equivalent: it stays 0.)
 */
export function resultOf(outcome: Outcome): { result: ReconcileResultLabel; error: boolean; terminal: boolean } {
  switch (outcome.result) {
    case "success":
      return { result: outcome.requeue === "after" ? "requeue_after" : "success", error: false, terminal: false };
    case "permanent":
    case "dead-letter":
      return { result: "error", error: true, terminal: true };
    case "retry":
    case "retry-later":
    case "unavailable":
      return { result: "error", error: true, terminal: false };
  }
}
