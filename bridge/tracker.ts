// What the bridge remembers per object — uid, resourceVersion, generation, a fingerprint and
// when it is due, never a body — and the decision of what to announce when an object (or a child
// of one) changes, or falls due. Children are not announced themselves: a change to a child
// announces its controller owner, the object a function reconciles.
//
// The bridge is the scheduler: a function records in the object's status what it wants next
// (core/schedule.ts); the tracker sees that status write on its watch and announces the object
// into its own FIFO group when due. A change of the object's own supersedes what was due, since
// its reconcile records the schedule afresh. A new bridge (a restart, a failover) announces only
// what needs work: objects whose generation is not yet observed, being deleted, or due.
import type { KeyEvent } from "../core/event.ts";
import type { GroupVersionResource } from "../core/resource-path.ts";
import { announceReason, nextReconcileOf } from "../core/schedule.ts";
import { DueSchedule } from "./due-schedule.ts";
import { controllerOf, fingerprint, lastWrittenByApply, lastWriteOf, type KubeObject } from "./kube-object.ts";

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
  /** The `at` of status.nextReconcile already announced or superseded: not announced again. */
  handled?: string;
  /** What the schedule holds for it: the status's `at`, and the reason to announce it with. */
  pending?: { at: string; reason: string };
  /** When the function last wrote its status (ms; 0 if never): children written later by others are news to it. */
  statusWrittenMs: number;
}
interface ChildEntry extends Entry {
  /** Key ("namespace/name", "/name" when cluster-scoped) of its controller owner among the parents, "" if none. */
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

/**
 * Whether a listed object needs a reconcile now: a generation not yet observed, a deletion to
 * finalize, or a write of its own (labels, annotations) that came after the function last wrote
 * its status — a change no announcement may have covered while no bridge was watching. Strictly
 * after, at managedFields' one-second resolution: an object written in the same second as its
 * status (created, then reconciled at once) is settled.
 */
function needsWork(obj: KubeObject, statusWrittenMs: number, functionFieldManager: string | undefined): boolean {
  const status = (obj as { status?: { observedGeneration?: unknown } }).status;
  const m = obj.metadata as KubeObject["metadata"] & { deletionTimestamp?: string };
  if (status?.observedGeneration !== (m.generation ?? 0) || m.deletionTimestamp !== undefined) return true;
  if (functionFieldManager === undefined || statusWrittenMs === 0) return false;
  return lastWriteOf(obj, (e) => e.subresource !== "status" && e.manager !== functionFieldManager) > statusWrittenMs;
}

export class ParentTracker extends Tracker<ParentEntry> {
  readonly #includeStatus: boolean;
  readonly #due: DueSchedule;

  constructor(resource: ResolvedResource, options: TrackerOptions) {
    super(resource, options);
    this.#includeStatus = !options.skipStatusOnly;
    this.#due = new DueSchedule({ now: () => options.now().getTime(), onDue: (key) => void this.#fire(key) });
  }

  /** Objects with a reconcile scheduled. */
  get scheduled(): number {
    return this.#due.size;
  }

  /** Stops the schedule's timer (the engine is stopping). */
  stop(): void {
    this.#due.stop();
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
    const next: ParentEntry = {
      uid: m.uid,
      rv: m.resourceVersion,
      generation: m.generation ?? 0,
      fp: fingerprint(obj, this.#includeStatus),
      epoch,
      statusWrittenMs: this.o.functionFieldManager === undefined ? 0 : lastWriteOf(obj, (e) => e.manager === this.o.functionFieldManager && e.subresource === "status"),
      ...(prev?.uid === m.uid && prev.handled !== undefined ? { handled: prev.handled } : {}),
      ...(prev?.uid === m.uid && prev.pending !== undefined ? { pending: prev.pending } : {}),
    };
    this.entries.set(key, next);
    // A new bridge knows nothing of what was announced before it: it announces what needs work.
    const announce = via === "list" && prev === undefined ? needsWork(obj, next.statusWrittenMs, this.o.functionFieldManager) : this.changed(prev, next);
    if (!announce) return this.#schedule(key, next, obj);
    // What its status has due is superseded too: the reconcile this announces records it afresh.
    const due = nextReconcileOf((obj as { status?: unknown }).status);
    if (due !== undefined) next.handled = due.at;
    const type = prev === undefined || prev.uid !== next.uid ? "ADDED" : "MODIFIED";
    await this.#announce(key, next, type, via, "");
  }

  /**
   * Schedules what the object's status asks for, unless it was announced (or superseded) already;
   * announces it now when it is due.
   */
  async #schedule(key: string, entry: ParentEntry, obj: KubeObject): Promise<void> {
    const next = nextReconcileOf((obj as { status?: unknown }).status);
    if (next === undefined || next.at === entry.handled) {
      if (next === undefined) this.#due.clear(key);
      return;
    }
    const atMs = Date.parse(next.at);
    if (atMs > this.o.now().getTime()) {
      entry.pending = { at: next.at, reason: announceReason(next) };
      this.#due.set(key, atMs);
      return;
    }
    entry.handled = next.at;
    delete entry.pending;
    this.#due.clear(key);
    await this.o.announce(this.#publishKey(key), this.#event(key, entry, "RESYNC", announceReason(next)), `due:${next.at}`);
  }

  /** The schedule fired: announce the object for the reason its status gives. */
  async #fire(key: string): Promise<void> {
    const entry = this.entries.get(key);
    const pending = entry?.pending;
    if (entry === undefined || pending === undefined) return;
    entry.handled = pending.at;
    delete entry.pending;
    await this.o.announce(this.#publishKey(key), this.#event(key, entry, "RESYNC", pending.reason), `due:${pending.at}`);
  }

  /** Every announcement of an object supersedes what it had due: its reconcile records the schedule afresh. */
  async #announce(key: string, entry: ParentEntry, type: KeyEvent["type"], reason: string, cause: string, keepExisting = false): Promise<void> {
    if (entry.pending !== undefined) {
      this.#due.clear(key);
      entry.handled = entry.pending.at;
      delete entry.pending;
    }
    await this.o.announce(this.#publishKey(key), this.#event(key, entry, type, reason), cause, keepExisting);
  }

  async remove(obj: KubeObject): Promise<void> {
    const m = obj.metadata;
    const key = keyOf(m.namespace, m.name);
    this.entries.delete(key);
    this.#due.clear(key);
    const e = { uid: m.uid, rv: m.resourceVersion, generation: m.generation ?? 0 };
    await this.o.announce(this.#publishKey(key), this.#event(key, e, "DELETED", "watch"), "deleted");
  }

  protected async vanished(key: string, entry: ParentEntry): Promise<void> {
    this.#due.clear(key);
    // Its last known version was announced already; "deleted" keeps this one from being deduplicated away.
    await this.o.announce(this.#publishKey(key), this.#event(key, entry, "DELETED", "relist"), "deleted");
  }

  /** Announces a known object again for a reason other than its own change (a child, a resync). */
  async reannounce(key: string, reason: string, cause: string, keepExisting = false): Promise<void> {
    const entry = this.entries.get(key);
    // Unknown: not listed yet (its own list will announce it), filtered out, or gone.
    if (entry === undefined) return;
    const type = reason === "resync" ? "RESYNC" : "MODIFIED";
    await this.#announce(key, entry, type, reason, cause, keepExisting);
  }

  /** The key a child's controller owner reference names in this tracker ("/name" when cluster-scoped). */
  keyOfOwner(childNamespace: string | undefined, ownerName: string): string {
    return keyOf(this.resource.namespaced ? childNamespace : undefined, ownerName);
  }

  /** When the function last wrote the object's status (ms), 0 when unknown. */
  statusWrittenMs(key: string): number {
    return this.entries.get(key)?.statusWrittenMs ?? 0;
  }

  /** A snapshot of every known object's key, for resync. */
  keys(): string[] {
    return [...this.entries.keys()];
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

  async upsert(obj: KubeObject, via: Via, epoch = 0): Promise<void> {
    const m = obj.metadata;
    const key = keyOf(m.namespace, m.name);
    const prev = this.entries.get(key);
    const owner = controllerOf(obj, this.#parents.resource.group, this.#parents.resource.kind)?.name;
    const parent = owner === undefined ? "" : this.#parents.keyOfOwner(m.namespace, owner);
    // Objects of this kind that no watched parent controls are not remembered at all.
    if (parent === "" && prev === undefined) return;
    const next: ChildEntry = { uid: m.uid, rv: m.resourceVersion, fp: fingerprint(obj, this.#includeStatus), parent, epoch };
    if (parent === "") this.entries.delete(key);
    else this.entries.set(key, next);
    if (via === "list" && prev === undefined) {
      // A new bridge's first list: news to the parent only if someone other than its function
      // wrote the child after the function last wrote the parent's status (the parents are listed first).
      if (!this.#writtenSinceParentSaw(obj, parent)) return;
    } else if (!this.changed(prev, next)) return;
    const sameParent = prev === undefined || prev.parent === parent;
    if (sameParent && this.o.functionFieldManager !== undefined && lastWrittenByApply(obj, this.o.functionFieldManager)) return;
    const cause = `child:${m.uid}:${m.resourceVersion}`;
    if (parent !== "") await this.#parents.reannounce(parent, "child", cause);
    // Adopted away or orphaned: the former owner must notice its child is no longer its own.
    if (prev !== undefined && prev.parent !== parent) await this.#parents.reannounce(prev.parent, "child", cause);
  }

  #writtenSinceParentSaw(obj: KubeObject, parent: string): boolean {
    const manager = this.o.functionFieldManager;
    const foreign = lastWriteOf(obj, (e) => !(e.manager === manager && e.operation === "Apply" && e.subresource === undefined) && (this.#includeStatus || e.subresource !== "status"));
    // managedFields times have one-second resolution: a write in the same second counts as news.
    return foreign > 0 && foreign >= this.#parents.statusWrittenMs(parent);
  }

  async remove(obj: KubeObject): Promise<void> {
    const m = obj.metadata;
    const key = keyOf(m.namespace, m.name);
    const prev = this.entries.get(key);
    if (prev === undefined) return;
    this.entries.delete(key);
    await this.#parents.reannounce(prev.parent, "child", `child-gone:${m.uid}`);
  }

  protected async vanished(_key: string, entry: ChildEntry): Promise<void> {
    await this.#parents.reannounce(entry.parent, "child", `child-gone:${entry.uid}`);
  }
}
