// Whether a cluster's API server takes work: one circuit per cluster, shared by the batch policy
// (settle.ts) and the adapters. An outage of the API server never spends a message's dead-letter
// budget, and one cluster's outage must not hold back another's work:
//  * the first "unavailable" outcome opens it; while open its messages are deferred untried
//    (settle.ts), and the poller stops receiving once every cluster's circuit is
//    open (Lambda cannot stop its event source); after the open period ONE message probes
//    (half-open); success closes it, failure re-opens it for twice as long, up to 2 s: probing is
//    one request, and the sooner a returned server is noticed the sooner work resumes.
//  * a message that finds its circuit probing waits in its batch, up to ADMISSION_WAIT_MS, for the
//    probe's answer instead of being deferred for seconds at once: after an outage the messages
//    received beside the probe go ahead the moment it succeeds. A circuit open and not probing
//    defers at once, so a batch holding another cluster's work is never held up by a down one.
// The circuit is kept small on purpose: the open period is core/backoff.ts's, spread ±20 % so
// that functions probing one server do not probe together.
import type { Logger } from "pino";
import { backoffMs } from "../../core/backoff.ts";

export interface CircuitOptions {
  clock: () => Date;
  logger: Logger;
  /** First open period; doubles per failed probe. Default 1 s. */
  baseMs?: number;
  /** Longest open period, i.e. the longest wait between the server's return and the next probe. Default 2 s. */
  maxMs?: number;
}

/** "closed": take work. "probe": take ONE message to test the API server. A number: wait this many ms. */
export type Admission = "closed" | "probe" | number;

export interface Circuit {
  admit(): Admission;
  /** The admitted work reached the API server (whatever the object's fate). */
  succeeded(): void;
  /** The admitted work failed for the infrastructure's sake. */
  failed(detail: string): void;
  /** A probe that found no message to try: let another attempt probe. */
  release(): void;
  /** How long a message deferred now should wait, in seconds. */
  deferSeconds(): number;
  isOpen(): boolean;
  /** A probe is under way: its answer decides, soon, whether the circuit closes. */
  isProbing(): boolean;
  /** Open and not yet due for a probe: ms until it is; else 0. No side effect (admit() has some). */
  waitMs(): number;
}

export function createCircuit(options: CircuitOptions): Circuit {
  const baseMs = options.baseMs ?? 1000;
  const maxMs = options.maxMs ?? 2000;
  const now = () => options.clock().getTime();
  let failures = 0; // the first failure and the failed probes since; 0: closed
  let openMs = 0; // 0: closed
  let openUntil = 0;
  let probing = false;
  let openedAt = 0;
  let deferred = 0;

  return {
    admit() {
      if (openMs === 0) return "closed";
      const wait = openUntil - now();
      if (wait > 0) return wait;
      if (probing) return 250;
      probing = true;
      return "probe";
    },
    succeeded() {
      probing = false;
      if (openMs === 0) return;
      options.logger.warn({ outageSeconds: Math.round((now() - openedAt) / 1000), deferred }, "API server reachable again; circuit closed, taking work");
      failures = 0;
      openMs = 0;
      deferred = 0;
    },
    failed(detail) {
      const wasProbe = probing;
      probing = false;
      if (openMs === 0) {
        openedAt = now();
        failures = 1;
        openMs = backoffMs(failures, { initialMs: baseMs, maxMs });
        options.logger.error(
          { error: detail },
          "API server unavailable; circuit open: no new work until a probe succeeds (messages are deferred, not dead-lettered)",
        );
      } else if (wasProbe) {
        openMs = backoffMs(++failures, { initialMs: baseMs, maxMs });
        options.logger.debug({ error: detail, nextProbeInMs: openMs }, "probe failed; circuit stays open");
      } else return;
      openUntil = now() + openMs * (0.8 + Math.random() * 0.4);
    },
    release() {
      probing = false;
    },
    deferSeconds() {
      deferred++;
      // Long enough not to spin during an outage, short enough to converge soon after it.
      return Math.round(Math.min(20, Math.max(3, (1.5 * openMs) / 1000)) * (0.8 + Math.random() * 0.4));
    },
    isOpen: () => openMs !== 0,
    isProbing: () => probing,
    waitMs: () => (openMs === 0 ? 0 : Math.max(0, openUntil - now())),
  };
}

/** The circuits of every cluster a process serves, created as their messages arrive. */
export interface Circuits {
  /** The circuit of the cluster a received event names. */
  of(cluster: string): Circuit;
  /** How long receiving may pause: while every known cluster's circuit is open, until the first is due; else 0. */
  waitMs(): number;
}

export function createCircuits(options: CircuitOptions): Circuits {
  const circuits = new Map<string, Circuit>();
  return {
    of(cluster) {
      let circuit = circuits.get(cluster);
      if (!circuit) circuits.set(cluster, (circuit = createCircuit({ ...options, logger: options.logger.child({ cluster }) })));
      return circuit;
    },
    waitMs() {
      const all = [...circuits.values()];
      if (all.length === 0 || all.some((c) => !c.isOpen())) return 0;
      return Math.min(...all.map((c) => c.waitMs()));
    },
  };
}

/** Tells the circuit how admitted work went; work that never reached the API server (a message re-sent as not due yet, a malformed one) says nothing. */
export function report(circuit: Circuit, outcome: { result: string; detail?: string; apiCalls?: number }): void {
  if (outcome.result === "unavailable") circuit.failed(outcome.detail ?? "");
  else if (outcome.apiCalls === 0) circuit.release();
  else circuit.succeeded();
}
