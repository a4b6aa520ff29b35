// The bridge, assembled from injected clients: usable in-process (tests, `crdfn dev`) and by
// the process entry (main.ts). With a Lease configured, only the leader watches and publishes;
// each leadership term starts from a fresh list, so whatever the previous leader had not
// published yet is published now (FIFO deduplication drops what it had).
import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import { setTimeout as sleep } from "node:timers/promises";
import type { SQSClient } from "@aws-sdk/client-sqs";
import type { KubeConfig } from "@kubernetes/client-node";
import type { Logger } from "pino";
import { Registry } from "prom-client";
import type { KeyEvent } from "../core/event.ts";
import type { BridgeConfig } from "./config.ts";
import { resolveResource } from "./discovery.ts";
import { KubeHttp } from "../clients/kube-http.ts";
import { LeaderElector } from "./lease.ts";
import { createBridgeMetrics, type BridgeMetrics } from "./metrics.ts";
import { Publisher } from "./publisher.ts";
import { runReflector } from "./reflector.ts";
import { ChildTracker, ParentTracker, type Announce, type ObjectSink, type TrackerOptions } from "./tracker.ts";

export interface BridgeDeps {
  kubeConfig: KubeConfig;
  sqs: SQSClient;
  logger: Logger;
  clock?: () => Date;
  registry?: Registry;
}

export interface RunningBridge {
  /** Resolves when this replica has handed its initial list to the publisher (as leader, if electing). */
  ready: Promise<void>;
  /** For /readyz: synced, or a healthy standby. */
  isReady(): boolean;
  isLeader(): boolean;
  registry: Registry;
  /** Objects waiting to be published (for tests and the bench). */
  pendingCount(): number;
  /** Stops watching, flushes what is buffered (up to `flushTimeoutMs`), releases the Lease. */
  stop(flushTimeoutMs?: number): Promise<void>;
}

interface Engine {
  synced: Promise<void>;
  publisher: Publisher;
  stop(flushTimeoutMs: number): Promise<void>;
}

/** Each watched resource's events go to its own queueUrl when it names one, else to queue.url. */
function queueRouter(config: BridgeConfig): (event: KeyEvent) => string {
  const routes = new Map(config.resources.map((r) => [`${r.group}/${r.plural}`, r.queueUrl ?? config.queue.url]));
  return (event) => routes.get(`${event.group}/${event.plural}`) ?? config.queue.url;
}

function startEngine(config: BridgeConfig, deps: Required<BridgeDeps>, metrics: BridgeMetrics): Engine {
  const { logger } = deps;
  const controller = new AbortController();
  const signal = controller.signal;
  const http = new KubeHttp({ kubeConfig: deps.kubeConfig, timeoutMs: 30_000 });
  const publisher = new Publisher({
    sqs: deps.sqs,
    queueUrlOf: queueRouter(config),
    mode: config.queue.mode,
    maxPending: config.maxPending,
    concurrency: config.publishConcurrency,
    logger,
    metrics,
    now: () => deps.clock().getTime(),
  });
  const announce: Announce = async (key, event, cause, keepExisting) => {
    try {
      await publisher.offer(key, event, cause, keepExisting);
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

  const run = async (onSynced: () => void): Promise<void> => {
    const sinks: ObjectSink[] = [];
    for (const ref of config.resources) {
      const parent = new ParentTracker(await resolveResource(http, ref, signal, logger), trackerOptions);
      parents.push(parent);
      sinks.push(parent);
      for (const owned of ref.owns) {
        const child = await resolveResource(http, owned, signal, logger);
        sinks.push(new ChildTracker(child, parent, config.childStatus === "announce", trackerOptions));
      }
    }
    const scopes = config.namespaces.length === 0 ? [undefined] : config.namespaces;
    let unsynced = 0;
    const reflectors = sinks.flatMap((sink) =>
      (sink.resource.namespaced ? scopes : [undefined]).map((namespace) => {
        unsynced++;
        let counted = false;
        return runReflector({
          http,
          sink,
          namespace,
          labelSelector: sink instanceof ParentTracker ? config.labelSelector : "",
          pageSize: config.listPageSize,
          silenceMs: config.watchSilenceSeconds * 1000,
          logger,
          metrics,
          signal,
          onSynced: () => {
            if (!counted && (counted = true) && --unsynced === 0) onSynced();
          },
        });
      }),
    );
    await Promise.all([...reflectors, resyncLoop()]);
  };

  const resyncLoop = async (): Promise<void> => {
    if (config.resyncSeconds === 0) return;
    while (!signal.aborted) {
      const delay = config.resyncSeconds * 1000 * (0.9 + Math.random() * 0.2);
      await sleep(delay, undefined, { signal }).catch(() => undefined); // an abort ends the wait
      const cause = `resync:${deps.clock().getTime()}`;
      for (const parent of parents) {
        for (const [namespace, name] of parent.keys()) {
          if (signal.aborted) return;
          await parent.reannounce(namespace, name, "resync", cause, true);
        }
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
    publisher,
    async stop(flushTimeoutMs) {
      controller.abort();
      // Flush before waiting for the reflectors: one may be parked in a full buffer, and only
      // progress (or close) frees it.
      if (flushTimeoutMs > 0 && !(await publisher.flush(flushTimeoutMs))) logger.warn({ pending: publisher.pendingCount }, "stopped before the queue took every event; the next leader relists");
      publisher.close();
      await done.catch(() => undefined);
    },
  };
}

export function startBridge(config: BridgeConfig, deps: BridgeDeps): RunningBridge {
  const full: Required<BridgeDeps> = { clock: () => new Date(), registry: new Registry(), ...deps };
  const metrics = createBridgeMetrics(full.registry);
  const logger = deps.logger;
  let engine: Engine | undefined;
  let synced = false;
  let resolveReady: () => void = () => undefined;
  const ready = new Promise<void>((resolve) => (resolveReady = resolve));

  const begin = (): void => {
    const e = startEngine(config, full, metrics);
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
      http: new KubeHttp({ kubeConfig: full.kubeConfig }),
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
    isReady: () => synced || (elector !== undefined && !elector.isLeader),
    isLeader: () => (elector === undefined ? true : elector.isLeader),
    registry: full.registry,
    pendingCount: () => engine?.publisher.pendingCount ?? 0,
    async stop(flushTimeoutMs = 10_000) {
      electionStop.abort();
      await electing;
      await end(flushTimeoutMs);
      await elector?.release();
      metrics.leader.set(0);
    },
  };
}
