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
import { kubeObjectSchema, type KubeObject } from "./kube-object.ts";
import type { BridgeMetrics } from "./metrics.ts";
import type { ObjectSink, Via } from "./tracker.ts";

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
function parseObject(raw: unknown, logger: Logger): KubeObject | undefined {
  const parsed = kubeObjectSchema.safeParse(raw);
  if (parsed.success) return parsed.data;
  logger.error({ issues: parsed.error.issues.length }, "skipping an object without name, uid or resourceVersion");
  return undefined;
}

export async function runReflector(o: ReflectorOptions): Promise<void> {
  const r = o.sink.resource;
  const label = `${r.plural}${r.group === "" ? "" : `.${r.group}`}`;
  const log = o.logger.child({ resource: label, namespace: o.namespace ?? "*" });
  const path = resourcePath({ ...r, namespace: r.namespaced ? o.namespace : undefined });
  const labelSelector = o.labelSelector === "" ? undefined : o.labelSelector;
  let resourceVersion = "";
  let listReason: "initial" | "gone" | "expired" = "initial";
  let synced = false;
  let failures = 0;
  let notServed = false;

  const list = async (): Promise<string> => {
    o.metrics.relists.inc({ resource: label, reason: listReason });
    const via: Via = synced ? "relist" : "list";
    const epoch = o.sink.beginList();
    let cont: string | undefined;
    let listRv = "";
    do {
      const page = (await o.http.getJson(path, { limit: String(o.pageSize), continue: cont, labelSelector }, o.signal, o.metadataOnly ? METADATA_LIST : undefined)) as {
        metadata?: { continue?: string; resourceVersion?: string };
        items?: unknown[];
      };
      for (const raw of page.items ?? []) {
        const obj = parseObject(raw, log);
        if (obj === undefined) continue;
        o.metrics.observed.inc({ resource: label, type: "LISTED" });
        await o.sink.upsert(obj, via, epoch);
      }
      cont = page.metadata?.continue || undefined;
      listRv = page.metadata?.resourceVersion ?? listRv;
    } while (cont !== undefined && !o.signal.aborted);
    if (o.signal.aborted) return "";
    await o.sink.sweep(o.namespace, epoch);
    o.metrics.objects.set({ resource: label }, o.sink.size);
    return listRv;
  };

  const watch = async (): Promise<void> => {
    // A server-side timeout spreads reconnects out; bookmarks keep resourceVersion fresh meanwhile.
    const timeoutSeconds = String(240 + Math.floor(Math.random() * 120));
    const events = o.http.watch(path, { resourceVersion, allowWatchBookmarks: "true", timeoutSeconds, labelSelector }, o.signal, o.silenceMs, o.metadataOnly ? METADATA_WATCH : undefined);
    for await (const ev of events) {
      if (ev.type === "ERROR") {
        const status = ev.object as { code?: number; reason?: string; message?: string };
        throw new ApiError(status.code ?? 500, status.reason ?? "Unknown", status.message ?? "watch error");
      }
      failures = 0;
      if (ev.type === "BOOKMARK") {
        // A bookmark carries only a resourceVersion: where to resume, nothing to announce.
        const rv = (ev.object as { metadata?: { resourceVersion?: unknown } }).metadata?.resourceVersion;
        if (typeof rv === "string" && rv !== "") resourceVersion = rv;
        continue;
      }
      const obj = parseObject(ev.object, log);
      if (obj === undefined) continue;
      o.metrics.observed.inc({ resource: label, type: ev.type });
      if (ev.type === "DELETED") await o.sink.remove(obj);
      else await o.sink.upsert(obj, "watch");
      o.metrics.objects.set({ resource: label }, o.sink.size);
      resourceVersion = obj.metadata.resourceVersion;
    }
  };

  while (!o.signal.aborted) {
    try {
      if (resourceVersion === "") {
        resourceVersion = await list();
        failures = 0;
        o.onRefused?.(undefined);
        if (notServed) log.info("resource served again; watching it");
        if (notServed || !synced) o.onServed?.(true);
        notServed = false;
        if (!synced && !o.signal.aborted) {
          synced = true;
          log.info({ objects: o.sink.size }, "initial list done");
          o.onSynced();
        }
      }
      if (o.signal.aborted) break;
      await watch();
      o.metrics.watchRestarts.inc({ resource: label, reason: "closed" });
    } catch (e) {
      if (o.signal.aborted) break;
      if (e instanceof ApiError && e.code === 410) {
        // The resourceVersion (or continue token) is compacted away: only a fresh list can say what changed.
        log.info({ err: e.message }, "resource version gone; relisting");
        o.metrics.watchRestarts.inc({ resource: label, reason: "gone" });
        listReason = resourceVersion === "" ? "expired" : "gone";
        resourceVersion = "";
        continue;
      }
      failures++;
      o.metrics.watchRestarts.inc({ resource: label, reason: "error" });
      // 404: the resource is no longer served (its CRD was deleted). Said once, and retried often
      // enough that a re-created CRD is picked up within seconds.
      const gone = e instanceof ApiError && e.code === 404;
      // A refusal while the server is not ready (ApiNotReady) is its outage, not the credential's.
      const down = isServerOutage(e);
      const refused = !down && e instanceof ApiError && (e.code === 401 || e.code === 403) && o.onRefused !== undefined;
      if (refused) o.onRefused?.(e);
      const backoff = backoffMs(failures, gone ? { ...BACKOFF, maxMs: NOT_SERVED_RETRY_MS } : down ? { ...BACKOFF, maxMs: SERVER_DOWN_RETRY_MS } : BACKOFF);
      if (!gone && !refused) log.warn({ err: (e as Error).message, retryInMs: Math.round(backoff) }, "list/watch failed; retrying");
      else if (gone && !notServed) log.warn({ err: (e as Error).message }, "resource not served any more (CRD deleted?); retrying until it is");
      if (gone && !notServed) o.onServed?.(false);
      // Not served until a list succeeds again (a refused connection meanwhile says nothing about it).
      if (gone) notServed = true;
      // Served again means a new CRD: only a fresh list says what it holds.
      if (gone) resourceVersion = "";
      await delay(backoff, undefined, { signal: o.signal }).catch(() => undefined); // an abort ends the wait
    }
  }
}
