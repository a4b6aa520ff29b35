// List then watch one resource in one namespace scope, forever, feeding an ObjectSink.
// Paginated LIST; WATCH with bookmarks from the last resourceVersion seen; 410 Gone (on the
// watch or an expired continue token) → relist, and the sink diffs the new list against what
// it knew. Errors and silence reconnect with jittered exponential backoff — at most a second for
// an API server that is down, hung or starting (clients/kube-errors.ts isServerOutage: no answer,
// 429/503/504, a 401/403 before it is ready): a refused connection costs nothing, and a watch
// must resume as soon as its server answers again.
import { setTimeout as delay } from "node:timers/promises";
import type { Logger } from "pino";
import { ApiError, isServerOutage, type KubeHttp } from "../clients/kube-http.ts";
import { backoffMs, type BackoffPolicy } from "../core/backoff.ts";
import { resourcePath } from "../core/resource-path.ts";
import { watchedObjectSchema, type WatchedObject } from "./watched-object.ts";
import type { BridgeMetrics } from "./metrics.ts";
import type { ObjectSink, Via } from "./sink.ts";

export interface ReflectorOptions {
  http: KubeHttp;
  sink: ObjectSink;
  /** undefined: all namespaces (or a cluster-scoped resource). */
  namespace: string | undefined;
  labelSelector: string;
  pageSize: number;
  silenceMs: number;
  logger: Logger;
  metrics: BridgeMetrics;
  signal: AbortSignal;
  /** Called once, when the first complete list has been handed to the sink. */
  onSynced: () => void;
  /** 401/403 from a ready server (the credential is refused: reported by the caller, once for all resources) and, after a list succeeds, undefined. */
  onRefused?: (e: ApiError | undefined) => void;
  /** false when the resource is not served (404: its CRD deleted), true when a list succeeds again. */
  onServed?: (served: boolean) => void;
  /**
   * Ask for metadata only (PartialObjectMetadata): the API server sends names, versions and
   * managedFields, never the content (a referenced Secret's data never reaches the bridge).
   */
  metadataOnly?: boolean;
}

// As client-go's metadata informer asks for them; JSON, with plain JSON as the fallback.
export const METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
export const METADATA_WATCH = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json";

const BACKOFF: BackoffPolicy = { initialMs: 500, maxMs: 30_000, jitter: 0.5 };
/** A resource not served: its CRD deleted, or not yet installed by a server that is starting. */
const NOT_SERVED_RETRY_MS = 2000;
/** The API server is down, hung or starting: retried at least every second. */
const SERVER_DOWN_RETRY_MS = 1000;

/** An object the API server sent that is not a Kubernetes object is a bug worth a loud log, not a crash. */
function parseObject(raw: unknown, logger: Logger): WatchedObject | undefined {
  const parsed = watchedObjectSchema.safeParse(raw);
  if (parsed.success) return parsed.data;
  logger.error({ issues: parsed.error.issues.length }, "skipping an object without name, uid or resourceVersion");
  return undefined;
}

/** What every reflector of one engine shares: how to reach the API server, and when to stop. */
export type ReflectorContext = Pick<ReflectorOptions, "http" | "pageSize" | "silenceMs" | "logger" | "metrics" | "signal" | "onRefused">;

/**
 * Lists and watches one sink in every namespace scope (one scope for a cluster-scoped resource);
 * `onSynced` once every scope has listed. `servedBy` gives each scope's reflector its report of
 * the resource being served or not (resource-readiness.ts).
 */
export function reflectScopes(
  context: ReflectorContext,
  scopes: ReadonlyArray<string | undefined>,
  sink: ObjectSink,
  labelSelector: string,
  hooks: { onSynced: () => void; servedBy?: (reflector: object) => (served: boolean) => void; metadataOnly?: boolean },
): Array<Promise<void>> {
  const scopesOf = sink.resource.namespaced ? scopes : [undefined];
  let unsynced = scopesOf.length;
  return scopesOf.map((namespace) => {
    let synced = false;
    const reflector = {};
    return runReflector({
      ...context,
      sink,
      namespace,
      labelSelector,
      metadataOnly: hooks.metadataOnly ?? false,
      ...(hooks.servedBy ? { onServed: hooks.servedBy(reflector) } : {}),
      onSynced: () => {
        if (!synced && (synced = true) && --unsynced === 0) hooks.onSynced();
      },
    });
  });
}

export function runReflector(options: ReflectorOptions): Promise<void> {
  return new Reflector(options).run();
}

/** One resource in one namespace scope: its list, its watch, and what each failure means. */
class Reflector {
  readonly #options: ReflectorOptions;
  readonly #label: string;
  readonly #log: Logger;
  readonly #path: string;
  readonly #labelSelector: string | undefined;
  /** Where the watch resumes; "" when only a fresh list can say what changed. */
  #resourceVersion = "";
  #listReason: "initial" | "gone" | "expired" = "initial";
  #synced = false;
  #failures = 0;
  #notServed = false;

  constructor(options: ReflectorOptions) {
    const r = options.sink.resource;
    this.#options = options;
    this.#label = `${r.plural}${r.group === "" ? "" : `.${r.group}`}`;
    this.#log = options.logger.child({ resource: this.#label, namespace: options.namespace ?? "*" });
    this.#path = resourcePath({ ...r, namespace: r.namespaced ? options.namespace : undefined });
    this.#labelSelector = options.labelSelector === "" ? undefined : options.labelSelector;
  }

  async run(): Promise<void> {
    const { signal, metrics } = this.#options;
    while (!signal.aborted) {
      try {
        if (this.#resourceVersion === "") this.#listed(await this.#list());
        if (signal.aborted) break;
        await this.#watch();
        metrics.watchRestarts.inc({ resource: this.#label, reason: "closed" });
      } catch (e) {
        if (signal.aborted) break;
        await this.#failed(e);
      }
    }
  }

  /** A list succeeded: the watch resumes from its resourceVersion, and the resource is served. */
  #listed(resourceVersion: string): void {
    const options = this.#options;
    this.#resourceVersion = resourceVersion;
    this.#failures = 0;
    options.onRefused?.(undefined);
    if (this.#notServed) this.#log.info("resource served again; watching it");
    if (this.#notServed || !this.#synced) options.onServed?.(true);
    this.#notServed = false;
    if (!this.#synced && !options.signal.aborted) {
      this.#synced = true;
      this.#log.info({ objects: options.sink.size }, "initial list done");
      options.onSynced();
    }
  }

  /** Pages through a full list into the sink, then sweeps what it no longer holds; resolves with the list's resourceVersion. */
  async #list(): Promise<string> {
    const { sink, metrics, signal, http } = this.#options;
    metrics.relists.inc({ resource: this.#label, reason: this.#listReason });
    const via: Via = this.#synced ? "relist" : "list";
    const epoch = sink.beginList();
    let cont: string | undefined;
    let listRv = "";
    do {
      const page = (await http.getJson(
        this.#path,
        { limit: String(this.#options.pageSize), continue: cont, labelSelector: this.#labelSelector },
        signal,
        this.#options.metadataOnly ? METADATA_LIST : undefined,
      )) as {
        metadata?: { continue?: string; resourceVersion?: string };
        items?: unknown[];
      };
      for (const raw of page.items ?? []) {
        const obj = parseObject(raw, this.#log);
        if (obj === undefined) continue;
        metrics.observed.inc({ resource: this.#label, type: "LISTED" });
        await sink.upsert(obj, via, epoch);
      }
      cont = page.metadata?.continue || undefined;
      listRv = page.metadata?.resourceVersion ?? listRv;
    } while (cont !== undefined && !signal.aborted);
    if (signal.aborted) return "";
    await sink.sweep(this.#options.namespace, epoch);
    metrics.objects.set({ resource: this.#label }, sink.size);
    return listRv;
  }

  async #watch(): Promise<void> {
    const { sink, metrics, signal, http } = this.#options;
    // A server-side timeout spreads reconnects out; bookmarks keep resourceVersion fresh meanwhile.
    const timeoutSeconds = String(240 + Math.floor(Math.random() * 120));
    const query = { resourceVersion: this.#resourceVersion, allowWatchBookmarks: "true", timeoutSeconds, labelSelector: this.#labelSelector };
    const events = http.watch(this.#path, query, signal, this.#options.silenceMs, this.#options.metadataOnly ? METADATA_WATCH : undefined);
    for await (const ev of events) {
      if (ev.type === "ERROR") {
        const status = ev.object as { code?: number; reason?: string; message?: string };
        throw new ApiError(status.code ?? 500, status.reason ?? "Unknown", status.message ?? "watch error");
      }
      this.#failures = 0;
      if (ev.type === "BOOKMARK") {
        // A bookmark carries only a resourceVersion: where to resume, nothing to announce.
        const rv = (ev.object as { metadata?: { resourceVersion?: unknown } }).metadata?.resourceVersion;
        if (typeof rv === "string" && rv !== "") this.#resourceVersion = rv;
        continue;
      }
      const obj = parseObject(ev.object, this.#log);
      if (obj === undefined) continue;
      metrics.observed.inc({ resource: this.#label, type: ev.type });
      if (ev.type === "DELETED") await sink.remove(obj);
      else await sink.upsert(obj, "watch");
      metrics.objects.set({ resource: this.#label }, sink.size);
      this.#resourceVersion = obj.metadata.resourceVersion;
    }
  }

  /** What a failed list or watch means, said once where it is a person's to fix; then the wait before trying again. */
  async #failed(e: unknown): Promise<void> {
    const options = this.#options;
    if (e instanceof ApiError && e.code === 410) {
      // The resourceVersion (or continue token) is compacted away: only a fresh list can say what changed.
      this.#log.info({ err: e.message }, "resource version gone; relisting");
      options.metrics.watchRestarts.inc({ resource: this.#label, reason: "gone" });
      this.#listReason = this.#resourceVersion === "" ? "expired" : "gone";
      this.#resourceVersion = "";
      return;
    }
    this.#failures++;
    options.metrics.watchRestarts.inc({ resource: this.#label, reason: "error" });
    // 404: the resource is no longer served (its CRD was deleted). Said once, and retried often
    // enough that a re-created CRD is picked up within seconds.
    const gone = e instanceof ApiError && e.code === 404;
    // A refusal while the server is not ready (ApiNotReady) is its outage, not the credential's.
    const down = isServerOutage(e);
    const refused = !down && e instanceof ApiError && (e.code === 401 || e.code === 403) && options.onRefused !== undefined;
    if (refused) options.onRefused?.(e);
    const backoff = backoffMs(this.#failures, gone ? { ...BACKOFF, maxMs: NOT_SERVED_RETRY_MS } : down ? { ...BACKOFF, maxMs: SERVER_DOWN_RETRY_MS } : BACKOFF);
    if (!gone && !refused) this.#log.warn({ err: (e as Error).message, retryInMs: Math.round(backoff) }, "list/watch failed; retrying");
    else if (gone && !this.#notServed) this.#log.warn({ err: (e as Error).message }, "resource not served any more (CRD deleted?); retrying until it is");
    if (gone && !this.#notServed) options.onServed?.(false);
    if (gone) {
      // Not served until a list succeeds again (a refused connection meanwhile says nothing about
      // it); served again means a new CRD, and only a fresh list says what it holds.
      this.#notServed = true;
      this.#resourceVersion = "";
    }
    await delay(backoff, undefined, { signal: options.signal }).catch(() => undefined); // an abort ends the wait
  }
}
