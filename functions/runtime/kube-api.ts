// The handful of API-server operations a reconcile needs, as an interface: the runtime is
// written against it, the HTTP client implements it, and a counting wrapper measures it.
import type { RequestTrace } from "../../clients/kube-http.ts";
import type { ResourceRef } from "../../core/resource-path.ts";

export interface KubeObject {
  apiVersion: string;
  kind: string;
  metadata: {
    name: string;
    namespace?: string;
    uid?: string;
    resourceVersion?: string;
    generation?: number;
    deletionTimestamp?: string;
    finalizers?: string[];
    [field: string]: unknown;
  };
  [field: string]: unknown;
}

export type { ResourceRef } from "../../core/resource-path.ts";

export interface KubeApi {
  /**
   * undefined when the object does not exist. With `notOlderThan` (a resourceVersion the caller
   * has seen) the API server may answer from its watch cache with any version at least that new;
   * without it, a quorum read from etcd.
   */
  get(ref: ResourceRef, read?: { notOlderThan?: string }): Promise<KubeObject | undefined>;
  /** PUT …/status with the object's resourceVersion as precondition (409 → ApiError.code 409, from clients/kube-http.ts). */
  replaceStatus(ref: ResourceRef, object: KubeObject, fieldManager?: string): Promise<KubeObject>;
  /** JSON merge patch; include metadata.resourceVersion to make it conditional. */
  mergePatch(ref: ResourceRef, patch: Record<string, unknown>, fieldManager?: string): Promise<KubeObject>;
  /** Server-side apply, forcing ownership of the fields it sets. */
  apply(ref: ResourceRef, object: KubeObject, fieldManager: string): Promise<KubeObject>;
  create(ref: ResourceRef, object: Record<string, unknown>): Promise<KubeObject>;
  /**
   * The objects of a collection (`ref` without name), filtered by a label selector such as
   * "a=b,c=d". With `notOlderThan`, from the watch cache as for `get`; without it, a consistent
   * read (which waits for the watch cache to reach etcd's current revision: tens of ms under load),
   * fetched in pages.
   */
  list(ref: ResourceRef, labelSelector?: string, read?: { notOlderThan?: string }): Promise<KubeObject[]>;
  /** DELETE with preconditions (a mismatch → ApiError 409); an object already gone is not an error. */
  delete(ref: ResourceRef, preconditions?: Preconditions): Promise<void>;
  /**
   * The same API with each request traced where `traceOf` says at the time (a change's step);
   * absent on an API that traces nothing (tracing off, a fake).
   */
  under?(traceOf: () => RequestTrace): KubeApi;
}

export interface Preconditions {
  uid?: string;
  resourceVersion?: string;
}

/** Wraps an API so every call is counted: the "API calls per reconcile" measurement. */
export function countingApi(api: KubeApi): { api: KubeApi; calls: () => number } {
  let n = 0;
  const counted =
    <A extends unknown[], R>(f: (...a: A) => Promise<R>) =>
    (...a: A): Promise<R> => {
      n += 1;
      return f(...a);
    };
  return {
    api: {
      get: counted(api.get.bind(api)),
      replaceStatus: counted(api.replaceStatus.bind(api)),
      mergePatch: counted(api.mergePatch.bind(api)),
      apply: counted(api.apply.bind(api)),
      create: counted(api.create.bind(api)),
      list: counted(api.list.bind(api)),
      delete: counted(api.delete.bind(api)),
    },
    calls: () => n,
  };
}
