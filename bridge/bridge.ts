// The bridge, assembled from injected clients: usable in-process (tests, `crdfn dev`) and by
// the process entry (run.ts). With a Lease configured, only the leader watches and publishes:
// each leadership term is an engine of its own (engine.ts), which starts from a fresh list and
// announces what needs work. What a person must fix (problems.ts) keeps the bridge unready.
import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import type { Tracer } from "@opentelemetry/api";
import type { SQSClient } from "@aws-sdk/client-sqs";
import type { Logger } from "pino";
import { Registry } from "prom-client";
import type { KubeConnection } from "../clients/kube-connection.ts";
import { KubeHttp } from "../clients/kube-http.ts";
import type { EventKey } from "../core/event-auth.ts";
import type { BridgeConfig } from "./config.ts";
import { checkQueues, destinationSettings, missingKey, missingLine } from "./destinations.ts";
import { systemTimers, type Timers } from "./due-schedule.ts";
import { Engine, type EngineDeps } from "./engine.ts";
import { LeaderElector } from "./lease.ts";
import { createBridgeMetrics } from "./metrics.ts";
import { Problems } from "./problems.ts";
import { resourceLabel } from "./resource-readiness.ts";
import type { ResyncFilter } from "./resync.ts";
import { sqsTransport } from "./sqs-transport.ts";
import type { QueueTransport } from "./transport.ts";

export interface BridgeDeps {
  /** A KubeConfig, or the pod's ServiceAccount (clients/kube-connection.ts). */
  kubeConfig: KubeConnection;
  /** The queue service: a transport (Pub/Sub: pubsub-transport.ts), or an SQS client to send with. */
  transport?: QueueTransport;
  sqs?: SQSClient;
  logger: Logger;
  clock?: () => Date;
  /** The timers of the schedule and the publisher (due-schedule.ts); Node's own unless given. */
  timers?: Timers;
  registry?: Registry;
  /** Where the credential comes from (kubeconfig path and context, or the token file), named when the API server refuses it. */
  credentialSource?: string;
  /** The cluster's event key (CRDFN_EVENT_KEY: loadEventKey in bridge/config.ts): every event is signed with it. Not a setting of BridgeConfig, which a ConfigMap holds. */
  eventKey: EventKey;
  /** Traces each change from the watch event to the queue (clients/tracing.ts startTracing); untraced without. */
  tracer?: Tracer;
}

export interface RunningBridge {
  /** Resolves when this replica has handed its initial list to the publisher (as leader, if electing). */
  ready: Promise<void>;
  /** For /readyz: synced, or a healthy standby. */
  isReady(): boolean;
  /** For /readyz's body: one line per watched resource (or why there is none). */
  readiness(): string[];
  isLeader(): boolean;
  registry: Registry;
  /** Objects waiting to be published, the start window's waiting among them (for tests and the bench). */
  pendingCount(): number;
  /** Objects with a reconcile scheduled (status.nextReconcile in the future). */
  scheduledCount(): number;
  /**
   * Announces the known objects again (`crdfn dev --watch` after a reload): those of one resource,
   * or one object of it. Resolves with how many were announced; 0 when this replica is not leading.
   */
  resync(filter?: ResyncFilter): Promise<number>;
  /** Stops watching, flushes what is buffered (up to `flushTimeoutMs`), releases the Lease. */
  stop(flushTimeoutMs?: number): Promise<void>;
}

export type { ResyncFilter } from "./resync.ts";

export function startBridge(config: BridgeConfig, deps: BridgeDeps): RunningBridge {
  const transport = deps.transport ?? (deps.sqs ? sqsTransport(deps.sqs) : undefined);
  if (!transport) throw new Error("startBridge: give a transport or an SQS client");
  const registry = deps.registry ?? new Registry();
  const metrics = createBridgeMetrics(registry);
  const { logger } = deps;
  const problems = new Problems(logger, metrics);
  const settings = destinationSettings(config, transport);
  const queuesChecked = new AbortController();
  void checkQueues(settings, transport, problems, queuesChecked.signal);
  const engineDeps: EngineDeps = {
    kubeConfig: deps.kubeConfig,
    transport,
    logger,
    clock: deps.clock ?? (() => new Date()),
    timers: deps.timers ?? systemTimers(),
    metrics,
    problems,
    credentialSource: deps.credentialSource ?? "the kubeconfig",
    eventKey: deps.eventKey,
    ...(deps.tracer ? { tracer: deps.tracer } : {}),
    // A destination the publisher finds missing (it was deleted, or the check could not look) is the same problem.
    onMissing: (destination, missing) => {
      const key = missingKey(transport, destination);
      if (missing || problems.has(key)) problems.set(key, missing ? missingLine(settings, transport, destination) : undefined);
    },
  };
  const terms = new Terms(config, engineDeps);

  const electionStop = new AbortController();
  let elector: LeaderElector | undefined;
  let electing: Promise<void> = Promise.resolve();
  const lease = config.lease;
  if (lease.name === undefined) {
    metrics.leader.set(1);
    terms.begin();
  } else {
    elector = new LeaderElector({
      http: new KubeHttp({ connection: deps.kubeConfig }),
      namespace: lease.namespace,
      name: lease.name,
      identity: lease.identity ?? `${hostname()}-${randomUUID().slice(0, 8)}`,
      durationSeconds: lease.durationSeconds,
      logger,
      now: engineDeps.clock,
      onStartedLeading: () => {
        metrics.leader.set(1);
        terms.begin();
      },
      onStoppedLeading: () => {
        metrics.leader.set(0);
        // No flush: this replica is no longer entitled to publish; the new leader relists.
        void terms.end(0);
      },
    });
    metrics.leader.set(0);
    electing = elector.run(electionStop.signal);
  }

  return {
    ready: terms.ready,
    isReady: () => (terms.synced || (elector !== undefined && !elector.isLeader)) && problems.size === 0,
    readiness: () => [...problems.lines(), ...terms.readiness(elector ? "standby: not the leader" : "stopped")],
    isLeader: () => (elector === undefined ? true : elector.isLeader),
    registry,
    pendingCount: () => (terms.engine ? terms.engine.publisher.pendingCount + terms.engine.startWaiting : 0),
    scheduledCount: () => terms.engine?.parents.reduce((n, p) => n + p.scheduled, 0) ?? 0,
    resync: (filter) => terms.engine?.resync(filter) ?? Promise.resolve(0),
    async stop(flushTimeoutMs = 10_000) {
      queuesChecked.abort();
      electionStop.abort();
      await electing;
      await terms.end(flushTimeoutMs);
      await elector?.release();
      metrics.leader.set(0);
    },
  };
}

/** The engine of the current term, if this replica has one, and whether it has synced. */
class Terms {
  engine: Engine | undefined;
  synced = false;
  /** Resolves when the first term to sync has synced. */
  readonly ready: Promise<void>;
  readonly #resolveReady: () => void;
  readonly #config: BridgeConfig;
  readonly #deps: EngineDeps;

  constructor(config: BridgeConfig, deps: EngineDeps) {
    this.#config = config;
    this.#deps = deps;
    let resolveReady: () => void = () => undefined;
    this.ready = new Promise<void>((resolve) => (resolveReady = resolve));
    this.#resolveReady = resolveReady;
  }

  begin(): void {
    const engine = new Engine(this.#config, this.#deps);
    this.engine = engine;
    void engine.synced.then(
      () => {
        if (this.engine !== engine) return;
        this.synced = true;
        this.#resolveReady();
      },
      () => undefined,
    );
  }

  async end(flushTimeoutMs: number): Promise<void> {
    const engine = this.engine;
    this.engine = undefined;
    this.synced = false;
    await engine?.stop(flushTimeoutMs);
  }

  /** One line per watched resource while a term runs, else `idle` (why there is none). */
  readiness(idle: string): string[] {
    const engine = this.engine;
    if (engine === undefined) return [idle];
    return this.#config.resources.map((r) => `${resourceLabel(r)}: ${engine.states.get(resourceLabel(r)) ?? "resolving"}`);
  }
}
