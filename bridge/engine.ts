// One term of the bridge's work (all of it without a Lease, each leadership term with one), in
// the order an object travels: reflectors (reflector.ts: list, then watch) feed each watched
// resource's ParentTracker (parent-tracker.ts: the index of what is known), whose DueSchedule
// (due-schedule.ts) announces what the objects' status has due, and every announcement goes to
// the Publisher (publisher.ts), which batches it to the queue. The kinds the resources own or
// read are watched once, however many resources name them (shared-kinds.ts). Each term starts
// from a fresh list and announces only what needs work.
import type { Tracer } from "@opentelemetry/api";
import type { Logger } from "pino";
import type { KubeConnection } from "../clients/kube-connection.ts";
import { KubeHttp, type ApiError } from "../clients/kube-http.ts";
import type { EventKey } from "../core/event-auth.ts";
import type { BridgeConfig, WatchedResource } from "./config.ts";
import { queueRouter } from "./destinations.ts";
import { resolveResource } from "./discovery.ts";
import type { Timers } from "./due-schedule.ts";
import { KeptBodies } from "./kept-bodies.ts";
import type { BridgeMetrics } from "./metrics.ts";
import { ParentTracker } from "./parent-tracker.ts";
import type { Problems } from "./problems.ts";
import { Publisher } from "./publisher.ts";
import { reflectScopes, type ReflectorContext } from "./reflector.ts";
import { refusalLine } from "./refusal.ts";
import { ResourceReadiness, type ResourceState } from "./resource-readiness.ts";
import { resyncEvery, resyncNow, type ResyncFilter } from "./resync.ts";
import { SharedKinds } from "./shared-kinds.ts";
import { StartWindow } from "./start-window.ts";
import type { TrackerOptions } from "./tracker.ts";
import type { QueueTransport } from "./transport.ts";

/**
 * How long a first-list announcement holds its start-window slot without an answer: past it, its
 * reconcile is taken as failed or slow (dead-lettered, the function down), and the next goes.
 */
const START_WINDOW_TIMEOUT_MS = 60_000;

/** What an engine works with: built by startBridge, the same for every term. */
export interface EngineDeps {
  kubeConfig: KubeConnection;
  transport: QueueTransport;
  logger: Logger;
  clock: () => Date;
  timers: Timers;
  metrics: BridgeMetrics;
  problems: Problems;
  /** Where the credential comes from, named when the API server refuses it. */
  credentialSource: string;
  eventKey: EventKey;
  /** A destination the publisher found missing (true) or there again (false). */
  onMissing: (destination: string, missing: boolean) => void;
  /** Traces each change (clients/tracing.ts); untraced without. */
  tracer?: Tracer;
}

/** A promise and what resolves it. */
interface Deferred {
  promise: Promise<void>;
  resolve: () => void;
}
function deferred(): Deferred {
  let resolve: () => void = () => undefined;
  const promise = new Promise<void>((res) => (resolve = res));
  return { promise, resolve };
}

export class Engine {
  /** Resolves once every watched resource is synced or known not to be served. */
  readonly synced: Promise<void>;
  /** Each watched resource's state, by resourceLabel. */
  readonly states = new Map<string, ResourceState>();
  readonly publisher: Publisher;
  readonly parents: ParentTracker[] = [];
  readonly #config: BridgeConfig;
  readonly #deps: EngineDeps;
  readonly #stopping = new AbortController();
  readonly #trackerOptions: TrackerOptions;
  readonly #reflectors: ReflectorContext;
  readonly #scopes: ReadonlyArray<string | undefined>;
  readonly #kinds: SharedKinds;
  /** Per watched resource: its own first list is done (or it is not served), which its shared kinds wait for. */
  readonly #listedOwn: Map<WatchedResource, Deferred>;
  readonly #done: Promise<void>;
  /** Paces the announcements of every resource's first list (start-window.ts). */
  readonly #startWindow: StartWindow;
  /** What every resource's first list may keep of the bodies it announces later. */
  readonly #initialBodies: KeptBodies;

  constructor(config: BridgeConfig, deps: EngineDeps) {
    const { logger, metrics, problems } = deps;
    this.#config = config;
    this.#deps = deps;
    const stopping = this.#stopping.signal;
    const http = new KubeHttp({ connection: deps.kubeConfig, timeoutMs: 30_000 });
    this.publisher = new Publisher({
      transport: deps.transport,
      destinationOf: queueRouter(config),
      onMissing: deps.onMissing,
      maxPending: config.maxPending,
      maxPendingBodyBytes: config.maxPendingBodyBytes,
      concurrency: config.publishConcurrency,
      ...(config.sendLingerMs === undefined ? {} : { lingerMs: config.sendLingerMs }),
      logger,
      metrics,
      now: () => deps.clock().getTime(),
      timers: deps.timers,
      eventKey: deps.eventKey,
      ...(deps.tracer ? { tracer: deps.tracer } : {}),
    });
    this.#initialBodies = new KeptBodies(config.maxInitialBodyBytes);
    this.#startWindow = new StartWindow({
      size: config.startWindow,
      timeoutMs: START_WINDOW_TIMEOUT_MS,
      timers: deps.timers,
      onChange: (waiting, open) => {
        metrics.startWaiting.set(waiting);
        metrics.startOpen.set(open);
        this.publisher.startWork(waiting + open > 0);
      },
    });
    this.#trackerOptions = {
      cluster: config.cluster,
      skipStatusOnly: config.skipStatusOnly,
      announce: (key, event, cause, options) => this.publisher.offer(key, event, cause, options),
      now: deps.clock,
      timers: deps.timers,
      ...(config.functionFieldManager ? { functionFieldManager: config.functionFieldManager } : {}),
      onTimerHeld: () => metrics.timersHeld.inc(),
      ...(deps.tracer ? { traceOf: (key: string) => this.publisher.lastTrace(key) } : {}),
    };
    const onRefused = (e: ApiError | undefined): void => problems.set("credential", e && refusalLine(e, deps.credentialSource));
    this.#reflectors = { http, pageSize: config.listPageSize, silenceMs: config.watchSilenceSeconds * 1000, logger, metrics, signal: stopping, onRefused };
    this.#scopes = config.namespaces.length === 0 ? [undefined] : config.namespaces;
    this.#listedOwn = new Map(config.resources.map((r) => [r, deferred()]));
    this.#kinds = new SharedKinds({
      config,
      reflectors: this.#reflectors,
      scopes: this.#scopes,
      trackerOptions: this.#trackerOptions,
      onFailed: this.#onFailed,
      listedOwn: (r) => this.#listedOwn.get(r)?.promise ?? Promise.resolve(),
    });
    let done: Promise<void> = Promise.resolve();
    this.synced = new Promise<void>((resolve, reject) => {
      done = this.#run(resolve).catch((e: unknown) => {
        if (!stopping.aborted) logger.error({ err: (e as Error).message }, "bridge engine failed");
        reject(e instanceof Error ? e : new Error(String(e)));
      });
    });
    this.synced.catch(() => undefined);
    this.#done = done;
  }

  /** What the first lists found needing work and the start window has not announced yet. */
  get startWaiting(): number {
    return this.#startWindow.waiting;
  }

  /** Announces the known objects again (all, one resource's, or one object); resolves with how many. */
  resync(filter: ResyncFilter | undefined): Promise<number> {
    return resyncNow(this.parents, filter, this.#deps.clock);
  }

  /** Stops watching, flushes what is buffered (up to `flushTimeoutMs`), and waits for the reflectors to end. */
  async stop(flushTimeoutMs: number): Promise<void> {
    this.#stopping.abort();
    this.#startWindow.stop();
    for (const parent of this.parents) parent.stop();
    // Flush before waiting for the reflectors: one may be parked in a full buffer, and only
    // progress (or close) frees it.
    if (flushTimeoutMs > 0 && !(await this.publisher.flush(flushTimeoutMs)))
      this.#deps.logger.warn({ pending: this.publisher.pendingCount }, "stopped before the queue took every event; the next leader relists");
    this.publisher.close();
    await this.#done.catch(() => undefined);
  }

  readonly #onFailed =
    (resource: string) =>
    (code: number | undefined): void =>
      this.#deps.metrics.discoveryFailures.inc({ resource, code: code === undefined ? "none" : String(code) });

  /** Watches every resource, each on its own; `onSynced` once each is synced or known not to be served. */
  async #run(onSynced: () => void): Promise<void> {
    const resources = this.#config.resources;
    let unsettled = resources.length;
    const settled = (): void => {
      if (--unsettled === 0) onSynced();
    };
    const watches = resources.map((ref) => this.#watchResource(ref, new ResourceReadiness(ref, this.states, this.#deps.metrics, settled)));
    const resyncs = resources.map((ref) => {
      const parentOf = () => this.parents.find((p) => p.resource.group === ref.group && p.resource.plural === ref.plural);
      return resyncEvery((ref.resyncSeconds ?? this.#config.resyncSeconds) * 1000, parentOf, this.#deps.clock, this.#stopping.signal);
    });
    await Promise.all([...watches, ...resyncs]);
  }

  /**
   * One watched resource: resolved through discovery (waiting while it is not served), then its
   * objects listed and watched; what its first list found needing work is announced once its
   * owned and read kinds have listed too, so that announcements carry their children's keys.
   */
  async #watchResource(ref: WatchedResource, readiness: ResourceReadiness): Promise<void> {
    const { logger } = this.#deps;
    const config = this.#config;
    const listedOwn = this.#listedOwn.get(ref)!;
    const owned = ref.owns.map((k) => this.#kinds.childKind(k));
    const read = (ref.reads ?? []).map((k) => this.#kinds.referenceKind(k));
    const { http, signal: stopping, onRefused } = this.#reflectors;
    const resolved = await resolveResource(http, ref, stopping, logger, {
      onWaiting: () => {
        readiness.notServedYet();
        listedOwn.resolve();
      },
      ...(onRefused ? { onRefused } : {}),
      onFailed: this.#onFailed(readiness.label),
    });
    readiness.syncing(logger);
    const parent = new ParentTracker(resolved, this.#trackerOptions, {
      bodies: ref.bodies ?? config.bodies,
      maxBodyBytes: config.maxBodyBytes,
      initialBodies: this.#initialBodies,
      startWindow: this.#startWindow,
    });
    for (const kind of owned) parent.owns(await kind.tracker);
    for (const kind of read) parent.reads(await kind.tracker);
    this.parents.push(parent);
    const running = reflectScopes(this.#reflectors, this.#scopes, parent, config.labelSelector, {
      onSynced: listedOwn.resolve,
      servedBy: (r) => readiness.servedBy(r),
    });
    void Promise.all([listedOwn.promise, ...owned.map((k) => k.listed), ...read.map((k) => k.listed)]).then(async () => {
      await parent.releaseInitialWork();
      readiness.synced();
    });
    await Promise.all(running);
  }
}
