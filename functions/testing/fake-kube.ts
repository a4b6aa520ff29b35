// An in-memory API server for unit tests of a reconcile: implements the runtime's KubeApi port
// with the behaviour a reconcile relies on (resourceVersion, generation, preconditions, 404,
// server-side-apply-like upsert, generateName, finalizers, garbage collection of owned objects).
// Not a Kubernetes: no admission, no schema, no watch.
import { ApiError } from "../../clients/kube-http.ts";
import { sameJson } from "../../core/canonical-json.ts";
import { type KubeApi, type KubeObject, type Preconditions, type ResourceRef } from "../runtime/kube-api.ts";

export interface FakeKube extends KubeApi {
  /**
   * Who last wrote an object's content (not its status): `apply:<field manager>` for a
   * server-side apply that changed it, `update` for any other write; undefined if it is not there.
   * The testing kit announces a child's applied hash only after the function's own apply, as the bridge does.
   */
  lastContentWriter(ref: ResourceRef): string | undefined;
  /** Every stored object, optionally only those of one kind (and namespace). */
  objects(filter?: { kind?: string; namespace?: string }): KubeObject[];
  /** The stored Events (core/v1 and events.k8s.io/v1), oldest first. */
  events(): KubeObject[];
  /**
   * Stores an object as another client would create it (a victim, an existing child). One given a
   * `metadata.deletionTimestamp` is stored as being deleted since then, held by its finalizers
   * (without any, it is gone at once, as the API server deletes it).
   */
  put(ref: ResourceRef, object: Record<string, unknown>): KubeObject;
  /** Sets an object's status as its own controller would (a Deployment's replicas). */
  setStatus(ref: ResourceRef, status: Record<string, unknown>): KubeObject;
  /** This API server as a client whose writes `admission` may refuse, as a policy refuses the function's identity. */
  as(admission: Admission): KubeApi;
}

type Json = Record<string, unknown>;

const clone = <T>(v: T): T => structuredClone(v);
const isObject = (v: unknown): v is Json => v !== null && typeof v === "object" && !Array.isArray(v);
/** RFC 7386 JSON merge patch. */
function mergePatch(target: unknown, patch: unknown): unknown {
  if (!isObject(patch)) return clone(patch);
  const out: Json = isObject(target) ? { ...target } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v);
  }
  return out;
}

/** Removes from `target` the fields `previous` set that `next` no longer sets (what apply does to a manager's dropped fields). */
function dropUnapplied(target: unknown, previous: unknown, next: unknown): unknown {
  if (!isObject(target) || !isObject(previous)) return target;
  const out: Json = { ...target };
  for (const k of Object.keys(previous)) {
    if (!isObject(next) || !(k in next)) delete out[k];
    else out[k] = dropUnapplied(out[k], previous[k], next[k]);
  }
  return out;
}

const STORED_META = ["uid", "resourceVersion", "generation", "creationTimestamp", "deletionTimestamp"];
/** What counts towards generation: everything but metadata and status. */
const body = (o: Json): Json => Object.fromEntries(Object.entries(o).filter(([k]) => k !== "metadata" && k !== "status"));

/**
 * An admission check (a ValidatingAdmissionPolicy): given a write's resource and name, the stored
 * object (on change or delete) and the object after it (on create or change), a message refuses
 * the write with 403.
 */
export type Admission = (write: { ref: ResourceRef; name: string; existing: KubeObject | undefined; next: KubeObject | undefined }) => string | undefined;

const check = (admission: Admission | undefined, ref: ResourceRef, name: string, existing: KubeObject | undefined, next: KubeObject | undefined): void => {
  const refused = admission?.({ ref, name, existing, next });
  if (refused !== undefined) throw new ApiError(403, "Forbidden", `${ref.plural} "${name}" is forbidden: ValidatingAdmissionPolicy denied request: ${refused}`);
};
const storeKeyOf = (ref: ResourceRef, name = ref.name): string => `${ref.group}/${ref.plural}/${ref.namespace ?? ""}/${name ?? ""}`;
const collectionOf = (ref: ResourceRef): string => `${ref.group}/${ref.plural}/`;
const where = (ref: ResourceRef) => `${ref.plural} "${ref.namespace ? `${ref.namespace}/` : ""}${ref.name ?? ""}"`;
const notFound = (ref: ResourceRef) => new ApiError(404, "NotFound", `${where(ref)} not found`);

/** A write's preconditions against the stored object: 409 Conflict as the API server answers it. */
function checkPreconditions(ref: ResourceRef, current: KubeObject, p: Preconditions | undefined): void {
  if (p?.resourceVersion && p.resourceVersion !== current.metadata.resourceVersion) {
    throw new ApiError(
      409,
      "Conflict",
      `Operation cannot be fulfilled on ${where(ref)}: the object has been modified; please apply your changes to the latest version and try again`,
    );
  }
  if (p?.uid && p.uid !== current.metadata.uid)
    throw new ApiError(409, "Conflict", `Precondition failed: UID in precondition: ${p.uid}, UID in object meta: ${current.metadata.uid ?? ""}`);
}
/**
 * A new, empty in-memory API server. `clock` stamps creationTimestamp and deletionTimestamp
 * (default the wall clock; reconcileWithRuntime gives a new one its `now`).
 */
export function createFakeKube(opts: { clock?: () => Date } = {}): FakeKube {
  const clock = opts.clock ?? (() => new Date());
  const store = new Map<string, KubeObject>();
  const writers = new Map<string, string>();
  /** Last object each field manager applied, per object: what a re-apply may remove. */
  const applied = new Map<string, Map<string, Json>>();
  let version = 0;
  let serial = 0;

  const nextVersion = () => String((version += 1));

  function existing(ref: ResourceRef): KubeObject {
    const found = store.get(storeKeyOf(ref));
    if (!found) throw notFound(ref);
    return found;
  }

  /** Stores `next` as the new state of `previous` (or a new object), keeping server-owned metadata. */
  function save(ref: ResourceRef, previous: KubeObject | undefined, next: KubeObject): KubeObject {
    const now = clock()
      .toISOString()
      .replace(/\.\d{3}Z$/, "Z");
    const meta = { ...next.metadata };
    for (const k of STORED_META) delete meta[k];
    const stored: KubeObject = {
      ...next,
      metadata: {
        ...meta,
        ...(ref.namespace ? { namespace: ref.namespace } : {}),
        uid: previous?.metadata.uid ?? `00000000-0000-4000-8000-${String((serial += 1)).padStart(12, "0")}`,
        resourceVersion: "",
        generation: previous ? (previous.metadata.generation ?? 1) + (sameJson(body(previous), body(next)) ? 0 : 1) : 1,
        creationTimestamp: previous?.metadata.creationTimestamp ?? now,
        ...(previous?.metadata.deletionTimestamp ? { deletionTimestamp: previous.metadata.deletionTimestamp } : {}),
      },
    };
    // Like the API server, a write that changes nothing keeps the resourceVersion.
    if (previous && sameJson(stored, { ...previous, metadata: { ...previous.metadata, resourceVersion: "" } })) return clone(previous);
    stored.metadata.resourceVersion = nextVersion();
    if (stored.metadata.deletionTimestamp && !stored.metadata.finalizers?.length) {
      remove(ref);
      return clone(stored);
    }
    store.set(storeKeyOf(ref, stored.metadata.name), stored);
    return clone(stored);
  }

  function remove(ref: ResourceRef): void {
    const gone = store.get(storeKeyOf(ref));
    store.delete(storeKeyOf(ref));
    applied.delete(storeKeyOf(ref));
    writers.delete(storeKeyOf(ref));
    // Background garbage collection: whatever this object owned goes too.
    const uid = gone?.metadata.uid;
    if (!uid) return;
    for (const [key, o] of [...store]) {
      const owners = (o.metadata.ownerReferences as Array<{ uid?: string }> | undefined) ?? [];
      if (owners.some((r) => r.uid === uid)) {
        const [group = "", plural = "", namespace = "", name = ""] = key.split("/");
        deleteObject({ group, version: "", plural, name, ...(namespace ? { namespace } : {}) });
      }
    }
  }

  function deleteObject(ref: ResourceRef, preconditions?: Preconditions): void {
    const current = store.get(storeKeyOf(ref));
    if (!current) return;
    checkPreconditions(ref, current, preconditions);
    if (current.metadata.finalizers?.length) {
      if (!current.metadata.deletionTimestamp) {
        current.metadata.deletionTimestamp = clock()
          .toISOString()
          .replace(/\.\d{3}Z$/, "Z");
        current.metadata.resourceVersion = nextVersion();
      }
      return;
    }
    remove(ref);
  }

  function create(ref: ResourceRef, object: Json, admission?: Admission): KubeObject {
    const o = clone(object) as KubeObject;
    const meta = (o.metadata ?? {}) as KubeObject["metadata"] & { generateName?: string };
    const name = meta.name || (meta.generateName ? `${meta.generateName}${(serial += 1).toString(36).padStart(5, "0")}` : "");
    if (!name) throw new ApiError(422, "Invalid", `${ref.plural}: metadata.name or generateName is required`);
    const at = { ...ref, name };
    if (store.has(storeKeyOf(at))) throw new ApiError(409, "AlreadyExists", `${where(at)} already exists`);
    delete meta.generateName;
    check(admission, at, name, undefined, { ...o, metadata: { ...meta, name } });
    writers.set(storeKeyOf(at), "update");
    return save(at, undefined, { ...o, metadata: { ...meta, name } });
  }

  const server: Store = { store, applied, writers, storeKeyOf, collectionOf, existing, checkPreconditions, save, check, create, deleteObject };
  const reads = readsOf(server);
  const writes = (admission?: Admission) => writesOf(server, admission);

  return {
    ...reads,
    ...writes(),
    as: (admission) => ({ ...reads, ...writes(admission) }),

    ...inspectionOf(server),
  };
}

/** The in-memory API server's state and its primitives, which its reads and writes share. */
interface Store {
  store: Map<string, KubeObject>;
  applied: Map<string, Map<string, Json>>;
  writers: Map<string, string>;
  storeKeyOf: (ref: ResourceRef, name?: string) => string;
  collectionOf: (ref: ResourceRef) => string;
  existing: (ref: ResourceRef) => KubeObject;
  checkPreconditions: (ref: ResourceRef, current: KubeObject, p: Preconditions | undefined) => void;
  save: (ref: ResourceRef, previous: KubeObject | undefined, next: KubeObject) => KubeObject;
  check: (admission: Admission | undefined, ref: ResourceRef, name: string, existing: KubeObject | undefined, next: KubeObject | undefined) => void;
  create: (ref: ResourceRef, object: Json, admission?: Admission) => KubeObject;
  deleteObject: (ref: ResourceRef, preconditions?: Preconditions) => void;
}

/** The writes a client makes, refused where `admission` says so (none for the test's own admin client). */
function writesOf(server: Store, admission?: Admission): Pick<KubeApi, "mergePatch" | "apply" | "create" | "delete"> {
  const { store, applied, writers, storeKeyOf, existing, checkPreconditions, save, check, create, deleteObject } = server;
  return {
    mergePatch: (ref, patch) =>
      Promise.resolve().then(() => {
        const current = existing(ref);
        const meta = (patch.metadata ?? {}) as Json;
        checkPreconditions(ref, current, typeof meta.resourceVersion === "string" ? { resourceVersion: meta.resourceVersion } : undefined);
        // The main resource ignores status: it has its own subresource.
        const { status: _ignored, ...rest } = patch;
        const next = mergePatch(current, rest) as KubeObject;
        if (current.status !== undefined) next.status = clone(current.status);
        check(admission, ref, current.metadata.name, current, next);
        const saved = save(ref, current, next);
        if (saved.metadata.resourceVersion !== current.metadata.resourceVersion) writers.set(storeKeyOf(ref), "update");
        return saved;
      }),

    apply: (ref, object, fieldManager) =>
      Promise.resolve().then(() => {
        const key = storeKeyOf(ref);
        const current = store.get(key);
        const managers = applied.get(key) ?? new Map<string, Json>();
        const intent = clone(object) as Json;
        const meta = (intent.metadata ?? {}) as Json;
        if (current) checkPreconditions(ref, current, typeof meta.resourceVersion === "string" ? { resourceVersion: meta.resourceVersion } : undefined);
        const { status: _ignored, ...fields } = intent;
        const base = current ? (dropUnapplied(current, managers.get(fieldManager), fields) as KubeObject) : undefined;
        const next = mergePatch(base ?? {}, fields) as KubeObject;
        if (current?.status !== undefined) next.status = clone(current.status);
        check(admission, ref, ref.name ?? "", current, next);
        const saved = save(ref, current, next);
        applied.set(key, managers.set(fieldManager, fields));
        if (saved.metadata.resourceVersion !== current?.metadata.resourceVersion) writers.set(key, `apply:${fieldManager}`);
        return saved;
      }),

    create: (ref, object) => Promise.resolve().then(() => create(ref, object, admission)),

    delete: (ref, preconditions) =>
      Promise.resolve().then(() => {
        const current = store.get(storeKeyOf(ref));
        if (current) check(admission, ref, current.metadata.name, current, undefined);
        deleteObject(ref, preconditions);
      }),
  };
}

/** The reads, and the status write (which admission never refuses here). */
function readsOf(server: Store): Pick<KubeApi, "get" | "replaceStatus" | "list"> {
  const { store, storeKeyOf, collectionOf, existing, checkPreconditions, save } = server;
  return {
    get: (ref) => Promise.resolve(store.has(storeKeyOf(ref)) ? clone(store.get(storeKeyOf(ref))) : undefined),

    replaceStatus: (ref, object) =>
      Promise.resolve().then(() => {
        const current = existing(ref);
        checkPreconditions(ref, current, { ...(object.metadata.resourceVersion ? { resourceVersion: object.metadata.resourceVersion } : {}) });
        const next = clone(current);
        if (object.status === undefined) delete next.status;
        else next.status = clone(object.status);
        return save(ref, current, next);
      }),

    list: (ref, labelSelector) =>
      Promise.resolve().then(() => {
        const wanted = (labelSelector ?? "")
          .split(",")
          .filter(Boolean)
          .map((term) => term.split("=") as [string, string]);
        return [...store]
          .filter(([key]) => key.startsWith(collectionOf(ref)) && (!ref.namespace || key.startsWith(`${collectionOf(ref)}${ref.namespace}/`)))
          .map(([, o]) => o)
          .filter((o) => wanted.every(([k, v]) => (o.metadata.labels as Record<string, string> | undefined)?.[k] === v))
          .map(clone);
      }),
  };
}

/** What a test asks of the server beside the API: who wrote last, what is stored, putting objects in. */
function inspectionOf(server: Store): Pick<FakeKube, "lastContentWriter" | "objects" | "events" | "put" | "setStatus"> {
  const { store, writers, storeKeyOf, existing, save, create, deleteObject } = server;
  return {
    lastContentWriter: (ref) => (store.has(storeKeyOf(ref)) ? (writers.get(storeKeyOf(ref)) ?? "update") : undefined),

    objects: (filter = {}) =>
      [...store.values()]
        .filter((o) => (!filter.kind || o.kind === filter.kind) && (!filter.namespace || o.metadata.namespace === filter.namespace))
        .map(clone),

    events: () => [...store].filter(([key]) => key.startsWith("/events/") || key.startsWith("events.k8s.io/events/")).map(([, o]) => clone(o)),

    put: (ref, object) => {
      const created = create(ref, object);
      const since = (object.metadata as { deletionTimestamp?: unknown } | undefined)?.deletionTimestamp;
      if (typeof since !== "string") return created;
      // An API server ignores a client's deletionTimestamp (only a delete sets it, by its own clock): kept here, as if deleted then.
      const at = { ...ref, name: created.metadata.name };
      deleteObject(at);
      const held = store.get(storeKeyOf(at));
      if (!held) return { ...created, metadata: { ...created.metadata, deletionTimestamp: since } };
      held.metadata.deletionTimestamp = since;
      return clone(held);
    },

    setStatus: (ref, status) => {
      const current = existing(ref);
      return save(ref, current, { ...clone(current), status: clone(status) });
    },
  };
}
