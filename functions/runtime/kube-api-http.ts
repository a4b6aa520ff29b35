// The runtime's KubeApi (kube-api.ts) over the one Kubernetes HTTP client, clients/kube-http.ts.
import { ApiError, KubeHttp, type KubeAccess } from "../../clients/kube-http.ts";
import { resourcePath } from "../../core/resource-path.ts";
import type { KubeApi, KubeObject } from "./kube-api.ts";

export function createKubeApi(access: KubeAccess): KubeApi {
  const http = new KubeHttp(access);
  const write = async (method: string, path: string, body: unknown, contentType?: string, query?: Record<string, string>): Promise<KubeObject> =>
    (await http.json(method, path, { body, contentType, query })) as KubeObject;
  // From the watch cache when the caller names a version it has seen, else from etcd (consistent).
  // (A GET's resourceVersion means "not older than" already; a LIST's must say so.)
  const cachedRead = async (path: string, query: Record<string, string>, read: { notOlderThan?: string } | undefined, list = false): Promise<unknown> => {
    if (read?.notOlderThan === undefined) return http.json("GET", path, { query });
    try {
      return await http.json("GET", path, { query: { ...query, resourceVersion: read.notOlderThan, ...(list ? { resourceVersionMatch: "NotOlderThan" } : {}) } });
    } catch (e) {
      // The watch cache did not reach that version within the server's wait (504 "Too large
      // resource version", e.g. a lagging HA replica): read from etcd instead.
      if (e instanceof ApiError && e.code === 504) return http.json("GET", path, { query });
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
      const list = (await cachedRead(resourcePath(ref), labelSelector ? { labelSelector } : {}, read, true)) as { items?: KubeObject[] };
      return list.items ?? [];
    },
    delete: async (ref, preconditions) => {
      try {
        await http.json("DELETE", resourcePath(ref), { body: { apiVersion: "v1", kind: "DeleteOptions", ...(preconditions ? { preconditions } : {}), propagationPolicy: "Background" } });
      } catch (e) {
        if (!(e instanceof ApiError && e.code === 404)) throw e;
      }
    },
  };
}
