// What the bridge remembers per object — uid, resourceVersion, generation and a fingerprint,
// never a body — and the decision of what to announce when an object (or a child of one)
// changes. Children are not announced themselves: a change to a child announces its
// controller owner, the object a function reconciles.
import type { KeyEvent } from "../core/event.ts";
import type { GroupVersionResource } from "../core/resource-path.ts";
import { controllerOf, fingerprint, lastWrittenByApply, type KubeObject } from "./kube-object.ts";

export interface ResolvedResource extends GroupVersionResource {
  kind: string;
  namespaced: boolean;
}

/** How a change reached the bridge; becomes the event's `reason`. */
export type Via = "list" | "relist" | "watch";

/** Hands an event to the publisher; `cause` keeps distinct announcements of one version apart. */
export type Announce = (key: string, event: KeyEvent, cause: string, keepExisting?: boolean) => Promise<void>;

/** What a reflector feeds: the objects of one resource in one namespace scope. */
export interface ObjectSink {
  readonly resource: ResolvedResource;
  /** A new list starts; objects it does not mention by `sweep` are gone. */
  beginList(): number;
  upsert(obj: KubeObject, via: Via, epoch?: number): Promise<void>;
  remove(obj: KubeObject): Promise<void>;
  /** After a complete list: everything in `namespace` (all if undefined) not seen in it vanished. */
  sweep(namespace: string | undefined, epoch: number): Promise<void>;
  readonly size: number;
}

interface Entry {
  uid: string;
  rv: string;
  fp: string;
  /** The list that last saw it, for sweeping. */
  epoch: number;
}
interface ParentEntry extends Entry {
  generation: number;
}
interface ChildEntry extends Entry {
  /** Name of its controller owner among the parents (same namespace), "" if none. */
  parent: string;
}

export interface TrackerOptions {
  cluster: string;
  /** Skip changes touching only status, managedFields or resourceVersion. */
  skipStatusOnly: boolean;
  announce: Announce;
  now: () => Date;
  /**
   * Field manager the functions apply children with. A child change that is that apply is the
   * function's own write in answer to its parent's event: announcing it would only reconcile
   * the parent again for nothing. Unset: every change announces.
   */
  functionFieldManager?: string;
}

const keyOf = (namespace: string | undefined, name: string): string => `${namespace ?? ""}/${name}`;
const splitKey = (key: string): [string | undefined, string] => {
  const slash = key.indexOf("/");
  return [slash === 0 ? undefined : key.slice(0, slash), key.slice(slash + 1)];
};
const inScope = (key: string, namespace: string | undefined): boolean => namespace === undefined || key.startsWith(`${namespace}/`);

abstract class Tracker<E extends Entry> implements ObjectSink {
  readonly resource: ResolvedResource;
  protected readonly entries = new Map<string, E>();
  protected readonly o: TrackerOptions;
  #epoch = 0;

  constructor(resource: ResolvedResource, options: TrackerOptions) {
    this.resource = resource;
    this.o = options;
  }

  get size(): number {
    return this.entries.size;
  }

  beginList(): number {
    return ++this.#epoch;
  }

  /** Whether a change from `prev` to `next` is worth announcing. */
  protected changed(prev: E | undefined, next: Entry): boolean {
    if (prev === undefined || prev.uid !== next.uid) return true;
    return this.o.skipStatusOnly ? prev.fp !== next.fp : prev.rv !== next.rv;
  }

  abstract upsert(obj: KubeObject, via: Via, epoch?: number): Promise<void>;
  abstract remove(obj: KubeObject): Promise<void>;
  protected abstract vanished(key: string, entry: E): Promise<void>;

  async sweep(namespace: string | undefined, epoch: number): Promise<void> {
    const gone: Array<[string, E]> = [];
    for (const [key, entry] of this.entries) if (entry.epoch !== epoch && inScope(key, namespace)) gone.push([key, entry]);
    for (const [key, entry] of gone) {
      this.entries.delete(key);
      await this.vanished(key, entry);
    }
  }
}

export class ParentTracker extends Tracker<ParentEntry> {
  readonly #includeStatus: boolean;

  constructor(resource: ResolvedResource, options: TrackerOptions) {
    super(resource, options);
    this.#includeStatus = !options.skipStatusOnly;
  }

  #event(key: string, e: Pick<ParentEntry, "uid" | "rv" | "generation">, type: KeyEvent["type"], reason: string): KeyEvent {
    const [namespace, name] = splitKey(key);
    const r = this.resource;
    return {
      v: 1,
      cluster: this.o.cluster,
      group: r.group,
      version: r.version,
      plural: r.plural,
      kind: r.kind,
      ...(namespace === undefined ? {} : { namespace }),
      name,
      uid: e.uid,
      resourceVersion: e.rv,
      generation: e.generation,
      type,
      reason,
      observedAt: this.o.now().toISOString(),
    };
  }

  /** The key the publisher coalesces on: one pending event per object. */
  #publishKey(key: string): string {
    return `${this.resource.group}/${this.resource.plural}/${key}`;
  }

  async upsert(obj: KubeObject, via: Via, epoch = 0): Promise<void> {
    const m = obj.metadata;
    const key = keyOf(m.namespace, m.name);
    const prev = this.entries.get(key);
    const next: ParentEntry = { uid: m.uid, rv: m.resourceVersion, generation: m.generation ?? 0, fp: fingerprint(obj, this.#includeStatus), epoch };
    this.entries.set(key, next);
    if (!this.changed(prev, next)) return;
    const type = prev === undefined || prev.uid !== next.uid ? "ADDED" : "MODIFIED";
    await this.o.announce(this.#publishKey(key), this.#event(key, next, type, via), "");
  }

  async remove(obj: KubeObject): Promise<void> {
    const m = obj.metadata;
    const key = keyOf(m.namespace, m.name);
    this.entries.delete(key);
    const e = { uid: m.uid, rv: m.resourceVersion, generation: m.generation ?? 0 };
    await this.o.announce(this.#publishKey(key), this.#event(key, e, "DELETED", "watch"), "deleted");
  }

  protected async vanished(key: string, entry: ParentEntry): Promise<void> {
    // Its last known version was announced already; "deleted" keeps this one from being deduplicated away.
    await this.o.announce(this.#publishKey(key), this.#event(key, entry, "DELETED", "relist"), "deleted");
  }

  /** Announces a known object again for a reason other than its own change (a child, a resync). */
  async reannounce(namespace: string | undefined, name: string, reason: string, cause: string, keepExisting = false): Promise<void> {
    const key = keyOf(namespace, name);
    const entry = this.entries.get(key);
    // Unknown: not listed yet (its own list will announce it), filtered out, or gone.
    if (entry === undefined) return;
    const type = reason === "resync" ? "RESYNC" : "MODIFIED";
    await this.o.announce(this.#publishKey(key), this.#event(key, entry, type, reason), cause, keepExisting);
  }

  /** A snapshot of every known object, for resync. */
  keys(): Array<[string | undefined, string]> {
    return [...this.entries.keys()].map(splitKey);
  }
}

export class ChildTracker extends Tracker<ChildEntry> {
  readonly #parents: ParentTracker;
  readonly #includeStatus: boolean;

  constructor(resource: ResolvedResource, parents: ParentTracker, includeStatus: boolean, options: TrackerOptions) {
    super(resource, options);
    this.#parents = parents;
    this.#includeStatus = includeStatus;
  }

  protected override changed(prev: ChildEntry | undefined, next: ChildEntry): boolean {
    return super.changed(prev, next) || prev?.parent !== next.parent;
  }

  async upsert(obj: KubeObject, _via: Via, epoch = 0): Promise<void> {
    const m = obj.metadata;
    const key = keyOf(m.namespace, m.name);
    const prev = this.entries.get(key);
    const parent = controllerOf(obj, this.#parents.resource.group, this.#parents.resource.kind)?.name ?? "";
    // Objects of this kind that no watched parent controls are not remembered at all.
    if (parent === "" && prev === undefined) return;
    const next: ChildEntry = { uid: m.uid, rv: m.resourceVersion, fp: fingerprint(obj, this.#includeStatus), parent, epoch };
    if (parent === "") this.entries.delete(key);
    else this.entries.set(key, next);
    if (!this.changed(prev, next)) return;
    const sameParent = prev === undefined || prev.parent === parent;
    if (sameParent && this.o.functionFieldManager !== undefined && lastWrittenByApply(obj, this.o.functionFieldManager)) return;
    const cause = `child:${m.uid}:${m.resourceVersion}`;
    if (parent !== "") await this.#parents.reannounce(m.namespace, parent, "child", cause);
    // Adopted away or orphaned: the former owner must notice its child is no longer its own.
    if (prev !== undefined && prev.parent !== parent) await this.#parents.reannounce(m.namespace, prev.parent, "child", cause);
  }

  async remove(obj: KubeObject): Promise<void> {
    const m = obj.metadata;
    const key = keyOf(m.namespace, m.name);
    const prev = this.entries.get(key);
    if (prev === undefined) return;
    this.entries.delete(key);
    await this.#parents.reannounce(m.namespace, prev.parent, "child", `child-gone:${m.uid}`);
  }

  protected async vanished(key: string, entry: ChildEntry): Promise<void> {
    await this.#parents.reannounce(splitKey(key)[0], entry.parent, "child", `child-gone:${entry.uid}`);
  }
}
