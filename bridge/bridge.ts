// The bridge, assembled from injected clients: usable in-process (tests, `crdfn dev`) and by
// the process entry (main.ts). With a Lease configured, only the leader watches and publishes;
// each leadership term starts from a fresh list and announces what needs work (tracker.ts):
// generations not yet observed, deletions, what the objects' status has due — not the settled rest.
import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import { setTimeout as sleep } from "node:timers/promises";
import type { SQSClient } from "@aws-sdk/client-sqs";
import type { KubeConnection } from "../clients/kube-connection.ts";
import type { Logger } from "pino";
import { Registry } from "prom-client";
import type { KeyEvent } from "../core/event.ts";
import type { EventKey } from "../core/event-auth.ts";
import type { BridgeConfig, WatchedResource } from "./config.ts";
import { resolveResource } from "./discovery.ts";
import { refusalLine } from "./refusal.ts";
import { KubeHttp, type ApiError } from "../clients/kube-http.ts";
import { LeaderElector } from "./lease.ts";
import { createBridgeMetrics, type BridgeMetrics } from "./metrics.ts";
import { Publisher } from "./publisher.ts";
import { runReflector } from "./reflector.ts";
import { sqsTransport } from "./sqs-transport.ts";
import type { QueueTransport } from "./transport.ts";
import { ChildTracker, ParentTracker, type Announce, type ObjectSink, type ResolvedResource, type TrackerOptions } from "./tracker.ts";
import { ReferenceTracker } from "./reference-tracker.ts";
import type { GroupVersionResource } from "../core/resource-path.ts";

export interface BridgeDeps {
  /** A KubeConfig, or the pod's ServiceAccount (clients/kube-connection.ts). */
  kubeConfig: KubeConnection;
  /** The queue service: a transport (Pub/Sub: pubsub-transport.ts), or an SQS client to send with. */
  transport?: QueueTransport;
  sqs?: SQSClient;
  logger: Logger;
  clock?: () => Date;
  registry?: Registry;
  /** Where the credential comes from (kubeconfig path and context, or the token file), named when the API server refuses it. */
  credentialSource?: string;
  /** The cluster's event key (CRDFN_EVENT_KEY: loadEventKey in bridge/config.ts): every event is signed with it. Not a setting of BridgeConfig, which a ConfigMap holds. */
  eventKey: EventKey;
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
  /** Objects waiting to be published (for tests and the bench). */
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

export interface ResyncFilter {
  group: string;
  plural: string;
  namespace?: string;
  name?: string;
}

/** Where each watched resource stands, for /readyz and crdfn_bridge_resource_state. */
export const RESOURCE_STATES = ["resolving", "not-served", "syncing", "synced"] as const;
export type ResourceState = (typeof RESOURCE_STATES)[number];

const resourceLabel = (r: { group: string; version: string; plural: string }): string => `${r.group === "" ? "core" : r.group}/${r.version}/${r.plural}`;

interface Engine {
  synced: Promise<void>;
  states: ReadonlyMap<string, ResourceState>;
  publisher: Publisher;
  parents: readonly ParentTracker[];
  resync(filter: ResyncFilter | undefined): Promise<number>;
  stop(flushTimeoutMs: number): Promise<void>;
}

/** Each watched resource's events go to its own queue (or topic) when it names one, else to the bridge's. */
function queueRouter(config: BridgeConfig): (event: KeyEvent) => string {
  const fallback = defaultDestination(config);
  const routes = new Map(config.resources.map((r) => [`${r.group}/${r.plural}`, r.topic ?? r.queueUrl ?? fallback]));
  return (event) => routes.get(`${event.group}/${event.plural}`) ?? fallback;
}

/** The bridge's own queue URL or topic (the config's refinement allows exactly one). */
const defaultDestination = (config: BridgeConfig): string => config.queue.topic ?? config.queue.url ?? "";

/** Problems a person must fix: said once when they start and once when they end; the bridge is not ready meanwhile. */
interface Problems {
  set(key: string, line: string | undefined): void;
  has(key: string): boolean;
}

type EngineDeps = Required<Omit<BridgeDeps, "sqs" | "transport">> & { transport: QueueTransport; onMissing: (destination: string, missing: boolean) => void };

function startEngine(config: BridgeConfig, deps: EngineDeps, metrics: BridgeMetrics, problems: Problems): Engine {
  const { logger } = deps;
  const controller = new AbortController();
  const signal = controller.signal;
  const http = new KubeHttp({ connection: deps.kubeConfig, timeoutMs: 30_000 });
  const publisher = new Publisher({
    transport: deps.transport,
    destinationOf: queueRouter(config),
    onMissing: deps.onMissing,
    maxPending: config.maxPending,
    maxPendingBodyBytes: config.maxPendingBodyBytes,
    concurrency: config.publishConcurrency,
    logger,
    metrics,
    now: () => deps.clock().getTime(),
    eventKey: deps.eventKey,
  });
  const announce: Announce = async (key, event, cause, options) => {
    try {
      await publisher.offer(key, event, cause, options);
    } catch (e) {
      // Only a name the contract cannot carry gets here; no retry would ever fix it.
      logger.error({ object: key, err: (e as Error).message.slice(0, 300) }, "object cannot be announced under the event contract");
    }
  };
  const trackerOptions: TrackerOptions = {
    cluster: config.cluster,
    skipStatusOnly: config.skipStatusOnly,
    announce,
    now: deps.clock,
    ...(config.functionFieldManager ? { functionFieldManager: config.functionFieldManager } : {}),
  };
  const parents: ParentTracker[] = [];
  const onRefused = (e: ApiError | undefined): void =>
    problems.set("credential", e && refusalLine(e, deps.credentialSource));
  const onFailed = (resource: string) => (code: number | undefined): void => metrics.discoveryFailures.inc({ resource, code: code === undefined ? "none" : String(code) });
  const states = new Map<string, ResourceState>();

  // Each watched resource on its own: one whose CRD is missing (or not served yet) waits for it
  // alone, and the others publish meanwhile. The engine counts as synced once every resource
  // is either synced or known not to be served.
  const scopes = config.namespaces.length === 0 ? [undefined] : config.namespaces;
  /** Lists and watches one sink in every namespace scope; `onSynced` once each scope has listed. */
  const reflect = (sink: ObjectSink, labelSelector: string, onSynced: () => void, onServed?: (who: object) => (served: boolean) => void, metadataOnly = false): Array<Promise<void>> => {
    const scopesOf = sink.resource.namespaced ? scopes : [undefined];
    let unsynced = scopesOf.length;
    return scopesOf.map((namespace) => {
      let synced = false;
      const who = {};
      return runReflector({
        http,
        sink,
        namespace,
        labelSelector,
        pageSize: config.listPageSize,
        silenceMs: config.watchSilenceSeconds * 1000,
        logger,
        metrics,
        signal,
        onRefused,
        metadataOnly,
        ...(onServed ? { onServed: onServed(who) } : {}),
        onSynced: () => {
          if (!synced && (synced = true) && --unsynced === 0) onSynced();
        },
      });
    });
  };

  const parentListed = new Map<WatchedResource, { promise: Promise<void>; resolve: () => void }>();
  for (const r of config.resources) {
    let resolve: () => void = () => undefined;
    const promise = new Promise<void>((res) => (resolve = res));
    parentListed.set(r, { promise, resolve });
  }

  /** A kind other than the watched resources, watched once whichever operators name it. */
  interface SharedKind<T> {
    tracker: Promise<T>;
    /** Its first list is done in every namespace. */
    listed: Promise<void>;
  }
  const gvr = (r: GroupVersionResource): string => `${r.group}/${r.version}/${r.plural}`;
  /**
   * The kind `ref` in `kinds`, watched from its first call on: its list starts once every resource
   * naming it (`named`) has listed its own objects (or turned out not served).
   */
  const sharedKind = <T extends ObjectSink>(
    kinds: Map<string, SharedKind<T>>,
    ref: GroupVersionResource,
    named: (r: WatchedResource) => readonly GroupVersionResource[],
    trackerOf: (resolved: ResolvedResource) => T,
    watch: (tracker: T, listedNow: () => void) => Array<Promise<void>>,
    what: string,
  ): SharedKind<T> => {
    const id = gvr(ref);
    let kind = kinds.get(id);
    if (kind !== undefined) return kind;
    const namers = config.resources.filter((r) => named(r).some((o) => gvr(o) === id));
    let listedNow: () => void = () => undefined;
    const listed = new Promise<void>((res) => (listedNow = res));
    const tracker = resolveResource(http, ref, signal, logger, { onRefused, onFailed: onFailed(id) }).then(trackerOf);
    kind = { tracker, listed };
    kinds.set(id, kind);
    void (async () => {
      const t = await tracker;
      await Promise.all(namers.map((r) => parentListed.get(r)?.promise ?? Promise.resolve()));
      if (signal.aborted) return;
      await Promise.all(watch(t, listedNow));
    })().catch((e: unknown) => {
      if (!signal.aborted) logger.error({ resource: id, err: (e as Error).message }, `watching ${what} failed`);
    });
    return kind;
  };

  /**
   * Each owned kind: only its objects carrying crdfn's parent label (the functions label every
   * child they apply). A new bridge's first list of a child weighs it against when its parent's
   * status was last written (tracker.ts), hence after the parents' list.
   */
  const childKinds = new Map<string, SharedKind<ChildTracker>>();
  const childKindOf = (owned: GroupVersionResource): SharedKind<ChildTracker> =>
    sharedKind(
      childKinds,
      owned,
      (r) => r.owns,
      (resolved) => new ChildTracker(resolved, config.childStatus === "announce", trackerOptions),
      (child, listedNow) => reflect(child, config.childLabelSelector, listedNow),
      "an owned kind",
    );

  /**
   * Each referenced kind: every object (not only labelled ones: nobody labels a Secret for us), as
   * metadata only, after the objects that read it, whose status says what they reference.
   */
  const referenceKinds = new Map<string, SharedKind<ReferenceTracker>>();
  const referenceKindOf = (read: GroupVersionResource): SharedKind<ReferenceTracker> =>
    sharedKind(
      referenceKinds,
      read,
      (r) => r.reads ?? [],
      (resolved) => new ReferenceTracker(resolved, trackerOptions),
      (references, listedNow) => reflect(references, "", listedNow, undefined, true),
      "a referenced kind",
    );

  // Each watched resource on its own: one whose CRD is missing (or not served yet) waits for it
  // alone, and the others publish meanwhile. The engine counts as synced once every resource
  // is either synced or known not to be served.
  const run = async (onSynced: () => void): Promise<void> => {
    let unsettled = config.resources.length;
    const settled = (): void => {
      if (--unsettled === 0) onSynced();
    };
    const watchResource = async (ref: WatchedResource): Promise<void> => {
      const label = resourceLabel(ref);
      const listedHere = parentListed.get(ref)!;
      let counted = false;
      const settleOnce = (): void => {
        if (!counted && (counted = true)) settled();
      };
      const setState = (state: ResourceState): void => {
        if (states.get(label) === state) return;
        states.set(label, state);
        for (const s of RESOURCE_STATES) metrics.resourceState.set({ resource: label, state: s }, s === state ? 1 : 0);
      };
      setState("resolving");
      const kinds = ref.owns.map(childKindOf);
      const readKinds = (ref.reads ?? []).map(referenceKindOf);
      const resolved = await resolveResource(http, ref, signal, logger, {
        onWaiting: () => {
          setState("not-served");
          listedHere.resolve();
          settleOnce();
        },
        onRefused,
        onFailed: onFailed(label),
      });
      if (states.get(label) === "not-served") logger.info({ resource: label }, "resource served now; watching it");
      setState("syncing");
      const parent = new ParentTracker(resolved, trackerOptions, { bodies: ref.bodies ?? config.bodies, maxBodyBytes: config.maxBodyBytes });
      for (const kind of kinds) parent.owns(await kind.tracker);
      for (const kind of readKinds) parent.reads(await kind.tracker);
      parents.push(parent);
      // A reflector reports when its resource stops being served (its CRD deleted) and when it is
      // served again; the resource is not-served while any of its reflectors says so.
      const unserved = new Set<object>();
      let allSynced = false;
      const served = (who: object) => (isServed: boolean) => {
        if (isServed) unserved.delete(who);
        else unserved.add(who);
        setState(unserved.size > 0 ? "not-served" : allSynced ? "synced" : "syncing");
      };
      const running = reflect(parent, config.labelSelector, () => listedHere.resolve(), served);
      void Promise.all([listedHere.promise, ...kinds.map((k) => k.listed), ...readKinds.map((k) => k.listed)]).then(async () => {
        // What its first list found needing work is announced now that its children's keys are known.
        await parent.releaseInitialWork();
        allSynced = true;
        setState(unserved.size > 0 ? "not-served" : "synced");
        settleOnce();
      });
      await Promise.all(running);
    };
    await Promise.all([...config.resources.map(watchResource), ...config.resources.map((r) => resyncLoop(r))]);
  };

  /** Re-announces a resource's objects every resyncSeconds, spread evenly over the period rather than in one burst. */
  const resyncLoop = async (ref: WatchedResource): Promise<void> => {
    const periodMs = (ref.resyncSeconds ?? config.resyncSeconds) * 1000;
    if (periodMs === 0) return;
    const pause = (ms: number) => sleep(ms, undefined, { signal }).catch(() => undefined); // an abort ends the wait
    while (!signal.aborted) {
      const parent = parents.find((p) => p.resource.group === ref.group && p.resource.plural === ref.plural);
      const keys = parent?.keys() ?? [];
      if (parent === undefined || keys.length === 0) {
        await pause(periodMs);
        continue;
      }
      const cause = `resync:${deps.clock().getTime()}`;
      // At least 100 ms between bursts: a timer per object would cost more than it spreads.
      const tickMs = Math.max(100, periodMs / keys.length);
      const perTick = Math.ceil((keys.length * tickMs) / periodMs);
      for (let i = 0; i < keys.length && !signal.aborted; i += perTick) {
        for (const key of keys.slice(i, i + perTick)) await parent.reannounce(key, "resync", cause, { keepExisting: true });
        await pause(tickMs);
      }
    }
  };


  let done: Promise<void> = Promise.resolve();
  const synced = new Promise<void>((resolve, reject) => {
    done = run(resolve).catch((e: unknown) => {
      if (!signal.aborted) logger.error({ err: (e as Error).message }, "bridge engine failed");
      reject(e instanceof Error ? e : new Error(String(e)));
    });
  });
  synced.catch(() => undefined);

  return {
    synced,
    states,
    publisher,
    parents,
    async resync(filter) {
      let n = 0;
      const cause = `resync:${deps.clock().getTime()}`;
      for (const parent of parents) {
        if (filter && (parent.resource.group !== filter.group || parent.resource.plural !== filter.plural)) continue;
        for (const key of parent.keys()) {
          if (filter?.name !== undefined && key !== `${filter.namespace ?? ""}/${filter.name}`) continue;
          if (filter?.namespace !== undefined && !key.startsWith(`${filter.namespace}/`)) continue;
          await parent.reannounce(key, "resync", cause);
          n++;
        }
      }
      return n;
    },
    async stop(flushTimeoutMs) {
      controller.abort();
      for (const parent of parents) parent.stop();
      // Flush before waiting for the reflectors: one may be parked in a full buffer, and only
      // progress (or close) frees it.
      if (flushTimeoutMs > 0 && !(await publisher.flush(flushTimeoutMs))) logger.warn({ pending: publisher.pendingCount }, "stopped before the queue took every event; the next leader relists");
      publisher.close();
      await done.catch(() => undefined);
    },
  };
}

export function startBridge(config: BridgeConfig, deps: BridgeDeps): RunningBridge {
  const transport = deps.transport ?? (deps.sqs ? sqsTransport(deps.sqs) : undefined);
  if (!transport) throw new Error("startBridge: give a transport or an SQS client");
  const { sqs: _sqs, transport: _transport, ...rest } = deps;
  const base = { clock: () => new Date(), registry: new Registry(), credentialSource: "the kubeconfig", ...rest };
  const metrics = createBridgeMetrics(base.registry);
  const logger = deps.logger;
  const problemLines = new Map<string, string>();
  const problems: Problems = {
    has: (key) => problemLines.has(key),
    set(key, line) {
      if (problemLines.get(key) === line) return;
      if (line !== undefined) logger.error({ problem: key }, line);
      else logger.info({ problem: key }, "resolved");
      if (line === undefined) problemLines.delete(key);
      else problemLines.set(key, line);
      metrics.problem.set({ problem: key.split(" ")[0] ?? key }, [...problemLines.keys()].filter((k) => k.split(" ")[0] === key.split(" ")[0]).length);
    },
  };
  const settings = destinationSettings(config, transport);
  const queuesChecked = new AbortController();
  void checkQueues(settings, transport, problems, queuesChecked.signal);
  // A destination the publisher finds missing (it was deleted, or the check could not look) is the same problem.
  const onMissing = (destination: string, missing: boolean): void => {
    if (missing || problems.has(`${transport.noun} ${destination}`)) problems.set(`${transport.noun} ${destination}`, missing ? missingLine(settings, transport, destination) : undefined);
  };
  const full: EngineDeps = { ...base, transport, onMissing };
  let engine: Engine | undefined;
  let synced = false;
  let resolveReady: () => void = () => undefined;
  const ready = new Promise<void>((resolve) => (resolveReady = resolve));

  const begin = (): void => {
    const e = startEngine(config, full, metrics, problems);
    engine = e;
    void e.synced.then(
      () => {
        if (engine !== e) return;
        synced = true;
        resolveReady();
      },
      () => undefined,
    );
  };
  const end = async (flushTimeoutMs: number): Promise<void> => {
    const e = engine;
    engine = undefined;
    synced = false;
    await e?.stop(flushTimeoutMs);
  };

  const electionStop = new AbortController();
  let elector: LeaderElector | undefined;
  let electing: Promise<void> = Promise.resolve();
  const lease = config.lease;
  if (lease.name === undefined) {
    metrics.leader.set(1);
    begin();
  } else {
    elector = new LeaderElector({
      http: new KubeHttp({ connection: full.kubeConfig }),
      namespace: lease.namespace,
      name: lease.name,
      identity: lease.identity ?? `${hostname()}-${randomUUID().slice(0, 8)}`,
      durationSeconds: lease.durationSeconds,
      logger,
      now: full.clock,
      onStartedLeading: () => {
        metrics.leader.set(1);
        begin();
      },
      onStoppedLeading: () => {
        metrics.leader.set(0);
        // No flush: this replica is no longer entitled to publish; the new leader relists.
        void end(0);
      },
    });
    metrics.leader.set(0);
    electing = elector.run(electionStop.signal);
  }

  return {
    ready,
    isReady: () => (synced || (elector !== undefined && !elector.isLeader)) && problemLines.size === 0,
    readiness: () => [
      ...problemLines.values(),
      ...(engine ? config.resources.map((r) => `${resourceLabel(r)}: ${engine?.states.get(resourceLabel(r)) ?? "resolving"}`) : [elector ? "standby: not the leader" : "stopped"]),
    ],
    isLeader: () => (elector === undefined ? true : elector.isLeader),
    registry: full.registry,
    pendingCount: () => engine?.publisher.pendingCount ?? 0,
    scheduledCount: () => engine?.parents.reduce((n, p) => n + p.scheduled, 0) ?? 0,
    resync: (filter) => engine?.resync(filter) ?? Promise.resolve(0),
    async stop(flushTimeoutMs = 10_000) {
      queuesChecked.abort();
      electionStop.abort();
      await electing;
      await end(flushTimeoutMs);
      await elector?.release();
      metrics.leader.set(0);
    },
  };
}

/** Each destination the bridge sends to, and the setting that names it. */
function destinationSettings(config: BridgeConfig, transport: QueueTransport): Map<string, string> {
  const settings = new Map<string, string>([[defaultDestination(config), config.queue.topic !== undefined ? "CRDFN_PUBSUB_TOPIC" : "CRDFN_QUEUE_URL"]]);
  for (const r of config.resources) {
    const own = r.topic ?? r.queueUrl;
    if (own !== undefined) settings.set(own, `the ${transport.noun} of ${resourceLabel(r)} (CRDFN_RESOURCES @${transport.noun === "topic" ? "topic" : "url"})`);
  }
  return settings;
}

const missingLine = (settings: Map<string, string>, transport: QueueTransport, destination: string): string =>
  `${settings.get(destination) ?? transport.noun}: the ${transport.noun} ${destination} does not exist`;

/**
 * A queue (or topic) that does not exist is a setting a person must fix: said once, naming the
 * setting, and the bridge is not ready until it exists (checked again every 10 s). Other errors
 * are outages the publisher rides out.
 */
async function checkQueues(settings: Map<string, string>, transport: QueueTransport, problems: Problems, signal: AbortSignal): Promise<void> {
  const missing = new Set(settings.keys());
  while (missing.size > 0 && !signal.aborted) {
    for (const destination of [...missing]) {
      const key = `${transport.noun} ${destination}`;
      const exists = await transport.exists(destination, signal);
      if (signal.aborted) return;
      if (exists === true) {
        missing.delete(destination);
        problems.set(key, undefined);
      } else if (exists === false) problems.set(key, missingLine(settings, transport, destination));
      // Cannot tell (no permission to look, the service unreachable): the publisher's own
      // retries and logs cover it; keep asking only about what was found missing.
      else if (!problems.has(key)) missing.delete(destination);
    }
    if (missing.size > 0) await new Promise<void>((resolve) => {
      const t = setTimeout(resolve, 10_000);
      signal.addEventListener("abort", () => (clearTimeout(t), resolve()), { once: true });
    });
  }
}
