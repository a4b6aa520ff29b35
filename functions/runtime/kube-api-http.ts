// The runtime's KubeApi (kube-api.ts) over the one Kubernetes HTTP client, clients/kube-http.ts.
import type { Tracer } from "@opentelemetry/api";
import { ApiError, KubeHttp, type KubeAccess, type RequestTrace } from "../../clients/kube-http.ts";
import { resourcePath } from "../../core/resource-path.ts";
import type { KubeApi, KubeObject } from "./kube-api.ts";

/** Objects per page of a consistent LIST (the API server's own default page for kubectl). */
const LIST_PAGE_SIZE = 500;

export interface KubeApiOptions {
  /**
   * Every write is sent with `dryRun=All`: the API server runs admission, defaulting and
   * validation and answers with what it would store, and stores nothing (`crdfn diff`, `crdfn replay`).
   */
  dryRun?: boolean;
  /** Each request a span of its own, for an API taken `under` a change's trace (kube-api.ts). */
  tracer?: Tracer;
}

export function createKubeApi(access: KubeAccess, options: KubeApiOptions = {}): KubeApi {
  const http = new KubeHttp(access, options.tracer ? { tracer: options.tracer } : {});
  const dryRun: Record<string, string> = options.dryRun ? { dryRun: "All" } : {};
  const api = apiOver(http, dryRun, undefined);
  return options.tracer ? { ...api, under: (traceOf) => apiOver(http, dryRun, traceOf) } : api;
}

/** The API over one client; `traceOf`, asked at each request, says where in a trace it belongs. */
function apiOver(http: KubeHttp, dryRun: Record<string, string>, traceOf: (() => RequestTrace) | undefined): KubeApi {
  const json = (method: string, path: string, o: Parameters<KubeHttp["json"]>[2]): Promise<unknown> =>
    http.json(method, path, traceOf ? { ...o, trace: traceOf() } : o);
  const write = async (method: string, path: string, body: unknown, contentType?: string, query?: Record<string, string>): Promise<KubeObject> =>
    (await json(method, path, { body, contentType, query: { ...query, ...dryRun } })) as KubeObject;
  // From the watch cache when the caller names a version it has seen, else from etcd (consistent).
  // (A GET's resourceVersion means "not older than" already; a LIST's must say so.)
  const cachedRead = async (path: string, query: Record<string, string>, read: { notOlderThan?: string } | undefined, list = false): Promise<unknown> => {
    if (read?.notOlderThan === undefined) return json("GET", path, { query });
    try {
      return await json("GET", path, {
        query: { ...query, resourceVersion: read.notOlderThan, ...(list ? { resourceVersionMatch: "NotOlderThan" } : {}) },
      });
    } catch (e) {
      // The watch cache did not reach that version within the server's wait (504 "Too large
      // resource version", e.g. a lagging HA replica): read from etcd instead.
      if (e instanceof ApiError && e.code === 504) return json("GET", path, { query });
      throw e;
    }
  };
  const managedBy = (fieldManager: string | undefined): Record<string, string> | undefined => (fieldManager ? { fieldManager } : undefined);
  return {
    get: async (ref, read) => {
      try {
        return (await cachedRead(resourcePath(ref), {}, read)) as KubeObject;
      } catch (e) {
        if (e instanceof ApiError && e.code === 404) return undefined;
        throw e;
      }
    },
    replaceStatus: (ref, object, fieldManager) => write("PUT", resourcePath(ref, "status"), object, undefined, managedBy(fieldManager)),
    mergePatch: (ref, patch, fieldManager) => write("PATCH", resourcePath(ref), patch, "application/merge-patch+json", managedBy(fieldManager)),
    apply: (ref, object, fieldManager) => write("PATCH", resourcePath(ref), object, "application/apply-patch+yaml", { fieldManager, force: "true" }),
    create: (ref, object) => write("POST", resourcePath(ref), object),
    list: async (ref, labelSelector, read) => {
      const selector: Record<string, string> = labelSelector ? { labelSelector } : {};
      if (read?.notOlderThan !== undefined) return ((await cachedRead(resourcePath(ref), selector, read, true)) as { items?: KubeObject[] }).items ?? [];
      // A consistent read, in pages: a parent's thousands of children never come as one response.
      const items: KubeObject[] = [];
      let token: string | undefined;
      do {
        const page = (await json("GET", resourcePath(ref), {
          query: { ...selector, limit: String(LIST_PAGE_SIZE), ...(token ? { continue: token } : {}) },
        })) as { items?: KubeObject[]; metadata?: { continue?: string } };
        items.push(...(page.items ?? []));
        token = page.metadata?.continue || undefined;
      } while (token !== undefined);
      return items;
    },
    delete: async (ref, preconditions) => {
      try {
        await json("DELETE", resourcePath(ref), {
          query: dryRun,
          body: { apiVersion: "v1", kind: "DeleteOptions", ...(preconditions ? { preconditions } : {}), propagationPolicy: "Background" },
        });
      } catch (e) {
        if (!(e instanceof ApiError && e.code === 404)) throw e;
      }
    },
  };
}
