// The bridge's Prometheus metrics, registered on an injected registry (no global default).
import { Counter, Gauge, Histogram, type Registry } from "prom-client";

export interface BridgeMetrics {
  observed: Counter<"resource" | "type">;
  published: Counter<"type">;
  publishFailures: Counter<"reason">;
  sendRequests: Counter;
  withdrawn: Counter;
  timersHeld: Counter;
  watchRestarts: Counter<"resource" | "reason">;
  discoveryFailures: Counter<"resource" | "code">;
  relists: Counter<"resource" | "reason">;
  pending: Gauge;
  startWaiting: Gauge;
  startOpen: Gauge;
  queueLag: Gauge;
  publishDelay: Histogram;
  objects: Gauge<"resource">;
  leader: Gauge;
  resourceState: Gauge<"resource" | "state">;
  problem: Gauge<"problem">;
}

export function createBridgeMetrics(registry: Registry): BridgeMetrics {
  const registers = [registry];
  return {
    observed: new Counter({
      name: "crdfn_bridge_events_observed_total",
      help: "Watch and list changes seen, before filtering",
      labelNames: ["resource", "type"],
      registers,
    }),
    published: new Counter({ name: "crdfn_bridge_events_published_total", help: "Key events accepted by the queue", labelNames: ["type"], registers }),
    publishFailures: new Counter({
      name: "crdfn_bridge_publish_failures_total",
      help: "Key events the queue did not accept (retried)",
      labelNames: ["reason"],
      registers,
    }),
    sendRequests: new Counter({
      name: "crdfn_bridge_send_requests_total",
      help: "SendMessageBatch requests made (each a billed SQS request; events ÷ requests is the batch fill)",
      registers,
    }),
    timersHeld: new Counter({
      name: "crdfn_bridge_timers_held_total",
      help: "Times a due timer waited its turn: another object's announcement had waited unanswered 10 s (a backlog)",
      registers,
    }),
    withdrawn: new Counter({
      name: "crdfn_bridge_announcements_withdrawn_total",
      help: "Held announcements of the function's own child writes dropped unsent: its status write recorded the children as they are",
      registers,
    }),
    watchRestarts: new Counter({
      name: "crdfn_bridge_watch_restarts_total",
      help: "Watch connections re-opened",
      labelNames: ["resource", "reason"],
      registers,
    }),
    discoveryFailures: new Counter({
      name: "crdfn_bridge_discovery_failures_total",
      help: "API discovery requests for a watched kind that failed and are retried (code 404: not served yet; 401/403: the credential refused)",
      labelNames: ["resource", "code"],
      registers,
    }),
    relists: new Counter({
      name: "crdfn_bridge_relists_total",
      help: "Full lists (initial, after 410 Gone, after an expired continue token)",
      labelNames: ["resource", "reason"],
      registers,
    }),
    pending: new Gauge({ name: "crdfn_bridge_pending_events", help: "Objects waiting to be announced (bounded by maxPending)", registers }),
    startWaiting: new Gauge({
      name: "crdfn_bridge_start_waiting_objects",
      help: "Objects a starting bridge's first lists found needing work, not yet announced (bridge/start-window.ts)",
      registers,
    }),
    startOpen: new Gauge({
      name: "crdfn_bridge_start_open_objects",
      help: "A starting bridge's announcements of its first lists' work not yet answered by a status write (at most CRDFN_START_WINDOW)",
      registers,
    }),
    queueLag: new Gauge({ name: "crdfn_bridge_queue_lag_seconds", help: "Age of the oldest change not yet accepted by the queue", registers }),
    publishDelay: new Histogram({
      name: "crdfn_bridge_publish_delay_seconds",
      help: "From observing a change to the queue accepting its event",
      buckets: [0.01, 0.05, 0.1, 0.5, 1, 5, 15, 60, 300],
      registers,
    }),
    objects: new Gauge({ name: "crdfn_bridge_tracked_objects", help: "Objects whose key state the bridge keeps", labelNames: ["resource"], registers }),
    leader: new Gauge({ name: "crdfn_bridge_leader", help: "1 while this replica holds the Lease and publishes", registers }),
    problem: new Gauge({
      name: "crdfn_bridge_problem",
      help: "Problems a person must fix (credential refused, queue missing), by kind; the bridge is not ready while any is above 0",
      labelNames: ["problem"],
      registers,
    }),
    resourceState: new Gauge({
      name: "crdfn_bridge_resource_state",
      help: "1 for the state each watched resource is in (resolving, not-served, syncing, synced)",
      labelNames: ["resource", "state"],
      registers,
    }),
  };
}
