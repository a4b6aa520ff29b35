// What the bridge remembers per object — uid, resourceVersion, generation, a fingerprint and
// when it is due, never a body — and the decision of what to announce when an object (or a child
// of one) changes, or falls due. Children are not announced themselves: a change to a child
// announces its controller owner, the object a function reconciles.
//
// The bridge tells the function what it knows: an announcement carries the object as the watch
// delivered it (when it has it at hand and it is small enough) and the keys of its current
// children, from a keys-only index (parent → children) kept by the child trackers.
//
// The bridge is the scheduler: a function records in the object's status what it wants next
// (core/schedule.ts); the tracker sees that status write on its watch and announces the object
// into its own FIFO group when due. A change of the object's own supersedes what was due, since
// its reconcile records the schedule afresh. A new bridge (a restart, a failover) announces only
// what needs work: objects whose generation is not yet observed, being deleted, or due, and those
// whose metadata or children are not what the function recorded it left (core/reconciled.ts).
import { MAX_CHILD_KEYS, type ChildKey, type KeyEvent } from "../core/event.ts";
import { fenceOf } from "../core/fence.ts";
import { appliedHashOf, childrenDigest, childToken, metadataDigest, reconciledOf, type ChildMark, type Reconciled } from "../core/reconciled.ts";
import { groupOf, keyOf, splitKey, type GroupVersionResource } from "../core/resource-path.ts";
import { announceReason, nextReconcileOf } from "../core/schedule.ts";
import { DueSchedule } from "./due-schedule.ts";
import { finalizersManagedBy, fingerprint, statusFingerprint, lastContentWriteWasApply, lastWriteOf, type KubeObject } from "./kube-object.ts";
import { referencesOf, type ReferenceRecord } from "../core/references.ts";

export interface ResolvedResource extends GroupVersionResource {
  kind: string;
  namespaced: boolean;
}

/** How a change reached the bridge; becomes the event's `reason`. */
export type Via = "list" | "relist" | "watch";

export interface AnnounceOptions {
  /** A waiting announcement says at least as much: keep it (resync). */
  keepExisting?: boolean;
  /** Only bring a waiting announcement up to date (a newer body); announce nothing new. */
  onlyIfPending?: boolean;
  /** Wait this long before sending, for what usually follows (the function's status write). */
  holdMs?: number;
}

/** Hands an event to the publisher; `cause` keeps distinct announcements of one version apart. */
export type Announce = (key: string, event: KeyEvent, cause: string, options?: AnnounceOptions) => Promise<void>;

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

export interface Entry {
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
  /** Its finalizers, apart from `fp`: adding the function's own finalizer is not news to it. */
  finalizers: readonly string[];
  /** What the function recorded it reconciled (status.reconciled); undefined when an older function wrote its status. */
  reconciled?: Reconciled;
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

export interface ParentOptions {
  /** Put the object in its announcements (up to maxBodyBytes). */
  bodies: boolean;
  maxBodyBytes: number;
}

/** A referenced kind's tracker (reference-tracker.ts), as a parent tracker tells it what an object read. */
export interface ReferenceIndex {
  refer(parent: ParentTracker, parentKey: string, records: readonly ReferenceRecord[]): Promise<void>;
}

/**
 * How long an announcement caused by the function's own new child waits at most for the parent's
 * status write, which ends the wait and gives it the newest body (publisher).
 */
export const OWN_CHILD_HOLD_MS = 5000;

/**
 * How long a child's disappearance waits at most before its parent is announced, so that a prune
 * of thousands (the function's own deletes, one a few ms) is one announcement a second, not one
 * message per child queued behind the reconcile doing it. The parent's status write ends the wait.
 */
export const GONE_CHILD_HOLD_MS = 1000;

const NO_FINALIZERS: readonly string[] = [];
const sameList = (a: readonly string[], b: readonly string[]): boolean => a.length === b.length && a.every((x, i) => x === b[i]);
export const inScope = (key: string, namespace: string | undefined): boolean => namespace === undefined || key.startsWith(`${namespace}/`);

export abstract class Tracker<E extends Entry> implements ObjectSink {
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
 * finalize, or metadata (labels, annotations: a resync stamp) other than the function recorded it
 * reconciled — a change no announcement may have covered while no bridge was watching. Its
 * children are weighed once they are listed (releaseInitialWork).
 *
 * A status without the record (an older function wrote it): a write of its own that came after
 * the function last wrote its status. Strictly after, at managedFields' one-second resolution: an
 * object written in the same second as its status (created, then reconciled at once) is settled.
 */
function needsWork(obj: KubeObject, entry: ParentEntry, functionFieldManager: string | undefined): boolean {
  const status = (obj as { status?: { observedGeneration?: unknown } }).status;
  const m = obj.metadata as KubeObject["metadata"] & { deletionTimestamp?: string };
  if (status?.observedGeneration !== (m.generation ?? 0) || m.deletionTimestamp !== undefined) return true;
  if (entry.reconciled !== undefined) return entry.reconciled.metadata !== metadataDigest(obj);
  const statusWrittenMs = entry.statusWrittenMs;
  if (functionFieldManager === undefined || statusWrittenMs === 0) return false;
  return lastWriteOf(obj, (e) => e.subresource !== "status" && e.manager !== functionFieldManager) > statusWrittenMs;
}

/** What a status records of the function's last reconcile, as a ParentEntry holds it. */
function reconciledEntry(status: unknown): Pick<ParentEntry, "reconciled"> {
  const reconciled = reconciledOf(status);
  return reconciled === undefined ? {} : { reconciled };
}

/** The object as announced: everything the API server returned but managedFields, which no reconcile reads. */
function announcedBody(obj: KubeObject, maxBytes: number): KeyEvent["object"] {
  const { managedFields: _dropped, ...metadata } = obj.metadata as KubeObject["metadata"] & { managedFields?: unknown };
  const body = { ...obj, metadata };
  return Buffer.byteLength(JSON.stringify(body), "utf8") <= maxBytes ? (body) : undefined;
}

export class ParentTracker extends Tracker<ParentEntry> {
  readonly #includeStatus: boolean;
  readonly #due: DueSchedule;
  readonly #p: ParentOptions;
  readonly #children: ChildTracker[] = [];
  readonly #reads: ReferenceIndex[] = [];
  /** Objects its first list found needing work, announced once the children's keys are known; undefined after. */
  #initialWork: Set<string> | undefined = new Set();

  constructor(resource: ResolvedResource, options: TrackerOptions, parentOptions: ParentOptions = { bodies: true, maxBodyBytes: 64 * 1024 }) {
    super(resource, options);
    this.#includeStatus = !options.skipStatusOnly;
    this.#p = parentOptions;
    this.#due = new DueSchedule({ now: () => options.now().getTime(), onDue: (key) => void this.#fire(key) });
  }

  /** Its owned kinds' trackers, whose keys its announcements carry. */
  owns(child: ChildTracker): void {
    this.#children.push(child);
    child.serve(this);
  }

  /** The trackers of the kinds its objects reference, which index what their status records. */
  reads(tracker: ReferenceIndex): void {
    this.#reads.push(tracker);
  }

  /** Tells the referenced kinds' trackers what an object's status records it read ([] once it is gone). */
  async #refer(key: string, obj: KubeObject | undefined): Promise<void> {
    if (this.#reads.length === 0) return;
    const records = obj === undefined ? [] : referencesOf((obj as { status?: unknown }).status);
    for (const r of this.#reads) await r.refer(this, key, records);
  }

  /** Objects with a reconcile scheduled. */
  get scheduled(): number {
    return this.#due.size;
  }

  /** Stops the schedule's timer (the engine is stopping). */
  stop(): void {
    this.#due.stop();
  }

  #event(key: string, e: Pick<ParentEntry, "uid" | "rv" | "generation">, type: KeyEvent["type"], reason: string, obj?: KubeObject): KeyEvent {
    const [namespace, name] = splitKey(key);
    const r = this.resource;
    const object = type !== "DELETED" && obj !== undefined && this.#p.bodies ? announcedBody(obj, this.#p.maxBodyBytes) : undefined;
    return {
      v: 2,
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
      ...(object === undefined ? {} : { object }),
      ...(type === "DELETED" ? {} : this.#childrenOf(key)),
    };
  }

  /**
   * The keys of its children; none (unknown to the function, which lists them) when there are
   * more than any event could carry, without building a list only to drop it (core/event.ts withinCap).
   */
  #childrenOf(key: string): { children?: ChildKey[] } {
    if (this.#childCount(key) > MAX_CHILD_KEYS) return {};
    return { children: this.#children.flatMap((c) => c.keysOf(this, key)) };
  }

  /** The key the publisher coalesces on: one pending event per object. */
  #publishKey(key: string): string {
    return `${this.resource.group}/${this.resource.plural}/${key}`;
  }

  async upsert(obj: KubeObject, via: Via, epoch = 0): Promise<void> {
    await this.#upsert(obj, via, epoch);
    await this.#refer(keyOf(obj.metadata.namespace, obj.metadata.name), obj);
  }

  async #upsert(obj: KubeObject, via: Via, epoch: number): Promise<void> {
    const m = obj.metadata;
    const key = keyOf(m.namespace, m.name);
    const prev = this.entries.get(key);
    const next: ParentEntry = {
      uid: m.uid,
      rv: m.resourceVersion,
      generation: m.generation ?? 0,
      fp: fingerprint(obj, this.#includeStatus, false),
      finalizers: m.finalizers ?? NO_FINALIZERS,
      epoch,
      statusWrittenMs: this.o.functionFieldManager === undefined ? 0 : lastWriteOf(obj, (e) => e.manager === this.o.functionFieldManager && e.subresource === "status"),
      ...reconciledEntry((obj as { status?: unknown }).status),
      ...(prev?.uid === m.uid && prev.handled !== undefined ? { handled: prev.handled } : {}),
      ...(prev?.uid === m.uid && prev.pending !== undefined ? { pending: prev.pending } : {}),
    };
    this.entries.set(key, next);
    // A new bridge knows nothing of what was announced before it: it announces what needs work,
    // once its children's keys are known (releaseInitialWork).
    if (via === "list" && prev === undefined && this.#initialWork !== undefined) {
      if (needsWork(obj, next, this.o.functionFieldManager)) this.#initialWork.add(key);
      return this.#schedule(key, next, obj);
    }
    const announce = via === "list" && prev === undefined ? needsWork(obj, next, this.o.functionFieldManager) : this.#parentChanged(prev, next, obj);
    if (!announce) {
      // Not news (the function's own status write, most often); an announcement still waiting
      // to be sent gets this newer body, so its reconcile need not read the object again.
      if (this.#p.bodies) await this.o.announce(this.#publishKey(key), this.#event(key, next, "MODIFIED", "watch", obj), "", { onlyIfPending: true });
      return this.#schedule(key, next, obj);
    }
    // What its status has due is superseded too: the reconcile this announces records it afresh.
    const due = nextReconcileOf((obj as { status?: unknown }).status);
    if (due !== undefined) next.handled = due.at;
    const type = prev === undefined || prev.uid !== next.uid ? "ADDED" : "MODIFIED";
    await this.#announce(key, next, type, via, "", {}, obj);
  }

  /**
   * Whether a parent's change is news to its function. The function adding its own finalizer
   * (before its first reconcile, which goes on in the same call) is not: announcing it would
   * reconcile the object a second time for nothing. Any other finalizer change is news.
   */
  #parentChanged(prev: ParentEntry | undefined, next: ParentEntry, obj: KubeObject): boolean {
    if (this.changed(prev, next)) return true;
    if (prev === undefined || !this.o.skipStatusOnly || sameList(prev.finalizers, next.finalizers)) return false;
    const manager = this.o.functionFieldManager;
    const added = next.finalizers.filter((f) => !prev.finalizers.includes(f));
    if (manager === undefined || added.length === 0 || prev.finalizers.some((f) => !next.finalizers.includes(f))) return true;
    const own = finalizersManagedBy(obj, manager);
    return !added.every((f) => own.has(f));
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
    await this.o.announce(this.#publishKey(key), this.#event(key, entry, "RESYNC", announceReason(next), obj), `due:${next.at}`);
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

  /**
   * Announces what the first list found needing work, now that its children (listed after it) are
   * indexed: with them, every object whose children are not the ones its function recorded it
   * left — one vanished, appeared, or was written by someone else while no bridge watched.
   */
  async releaseInitialWork(): Promise<void> {
    const work = this.#initialWork;
    if (work === undefined) return;
    this.#initialWork = undefined;
    for (const [key, entry] of this.entries) {
      if (entry.reconciled !== undefined && !work.has(key) && entry.reconciled.children !== childrenDigest(this.#marksOf(key))) work.add(key);
    }
    for (const key of work) {
      const entry = this.entries.get(key);
      if (entry !== undefined) await this.#announce(key, entry, "ADDED", "list", "");
    }
  }

  /** Every announcement of an object supersedes what it had due: its reconcile records the schedule afresh. */
  async #announce(key: string, entry: ParentEntry, type: KeyEvent["type"], reason: string, cause: string, options: AnnounceOptions = {}, obj?: KubeObject): Promise<void> {
    this.#initialWork?.delete(key);
    if (entry.pending !== undefined) {
      this.#due.clear(key);
      entry.handled = entry.pending.at;
      delete entry.pending;
    }
    await this.o.announce(this.#publishKey(key), this.#event(key, entry, type, reason, obj), cause, options);
  }

  async remove(obj: KubeObject): Promise<void> {
    const m = obj.metadata;
    const key = keyOf(m.namespace, m.name);
    this.entries.delete(key);
    this.#due.clear(key);
    await this.#refer(key, undefined);
    const e = { uid: m.uid, rv: m.resourceVersion, generation: m.generation ?? 0 };
    await this.o.announce(this.#publishKey(key), this.#event(key, e, "DELETED", "watch"), "deleted");
  }

  protected async vanished(key: string, entry: ParentEntry): Promise<void> {
    this.#due.clear(key);
    await this.#refer(key, undefined);
    // Its last known version was announced already; "deleted" keeps this one from being deduplicated away.
    await this.o.announce(this.#publishKey(key), this.#event(key, entry, "DELETED", "relist"), "deleted");
  }

  /** Announces a known object again for a reason other than its own change (a child, a resync). */
  async reannounce(key: string, reason: string, cause: string, options: AnnounceOptions = {}): Promise<void> {
    const entry = this.entries.get(key);
    // Unknown: not listed yet (its own list will announce it), filtered out, or gone.
    if (entry === undefined) return;
    const type = reason === "resync" ? "RESYNC" : "MODIFIED";
    await this.#announce(key, entry, type, reason, cause, options);
  }

  /** Whether a child's controller owner reference names this tracker's kind. */
  isOwner(ref: { apiVersion: string; kind: string }): boolean {
    return ref.kind === this.resource.kind && groupOf(ref.apiVersion) === this.resource.group;
  }

  /** The key a child's controller owner reference names in this tracker ("/name" when cluster-scoped). */
  keyOfOwner(childNamespace: string | undefined, ownerName: string): string {
    return keyOf(this.resource.namespaced ? childNamespace : undefined, ownerName);
  }

  /** When the function last wrote the object's status (ms), 0 when unknown. */
  statusWrittenMs(key: string): number {
    return this.entries.get(key)?.statusWrittenMs ?? 0;
  }

  /** Whether the object's status records what its function reconciled (then its children are weighed by digest). */
  recordsReconciled(key: string): boolean {
    return this.entries.get(key)?.reconciled !== undefined;
  }

  /** Its current children, as the index knows them, in the form the function records them. */
  #marksOf(key: string): ChildMark[] {
    return this.#children.flatMap((c) => c.marksOf(this, key));
  }

  /** How many current children it has, of every owned kind. */
  #childCount(key: string): number {
    return this.#children.reduce((n, c) => n + c.countOf(this, key), 0);
  }

  /** A snapshot of every known object's key, for resync. */
  keys(): string[] {
    return [...this.entries.keys()];
  }
}

interface ChildEntry extends Entry {
  /** Its controller owner: the parent tracker and the parent's key there; undefined if no watched parent controls it. */
  owner?: { tracker: ParentTracker; key: string };
  /** Its applied hash, when the last write to its content was the function's own apply. */
  hash?: string;
  /** Its fence (crdfn.io/parent-generation), which the function raises without a content change. */
  gen?: number;
  /** A digest of its status, when its status changes announce the parent: never the function's write. */
  sfp?: string;
}

/**
 * The objects of one owned kind that carry crdfn's parent label (one watch per kind, whichever
 * operators own it), indexed by their controller owner. Only keys, never bodies.
 */
export class ChildTracker extends Tracker<ChildEntry> {
  readonly #parents: ParentTracker[] = [];
  readonly #byOwner = new Map<ParentTracker, Map<string, Set<string>>>();
  readonly #includeStatus: boolean;
  readonly #apiVersion: string;

  constructor(resource: ResolvedResource, includeStatus: boolean, options: TrackerOptions) {
    super(resource, options);
    this.#includeStatus = includeStatus;
    this.#apiVersion = resource.group === "" ? resource.version : `${resource.group}/${resource.version}`;
  }

  /** A parent kind that owns this kind (ParentTracker.owns calls it). */
  serve(parent: ParentTracker): void {
    if (!this.#parents.includes(parent)) this.#parents.push(parent);
  }

  /** The keys of a parent's current children of this kind. */
  keysOf(parent: ParentTracker, parentKey: string): ChildKey[] {
    const keys = this.#byOwner.get(parent)?.get(parentKey);
    if (keys === undefined) return [];
    const out: ChildKey[] = [];
    for (const key of keys) {
      const e = this.entries.get(key);
      if (e === undefined) continue;
      const [namespace, name] = splitKey(key);
      out.push({ apiVersion: this.#apiVersion, kind: this.resource.kind, ...(namespace === undefined ? {} : { namespace }), name, uid: e.uid, resourceVersion: e.rv, ...(e.hash === undefined ? {} : { appliedHash: e.hash }), ...(e.gen === undefined ? {} : { parentGeneration: e.gen }) });
    }
    return out;
  }

  /** A parent's current children of this kind, each by uid and token (core/reconciled.ts). */
  marksOf(parent: ParentTracker, parentKey: string): ChildMark[] {
    const out: ChildMark[] = [];
    for (const key of this.#byOwner.get(parent)?.get(parentKey) ?? []) {
      const e = this.entries.get(key);
      if (e !== undefined) out.push({ uid: e.uid, token: childToken(e.hash, e.fp) });
    }
    return out;
  }

  /** How many current children of this kind a parent has. */
  countOf(parent: ParentTracker, parentKey: string): number {
    return this.#byOwner.get(parent)?.get(parentKey)?.size ?? 0;
  }

  protected override changed(prev: ChildEntry | undefined, next: ChildEntry): boolean {
    return super.changed(prev, next) || prev?.owner?.tracker !== next.owner?.tracker || prev?.owner?.key !== next.owner?.key;
  }

  #ownerOf(obj: KubeObject): ChildEntry["owner"] {
    for (const ref of obj.metadata.ownerReferences ?? []) {
      if (ref.controller !== true) continue;
      const tracker = this.#parents.find((p) => p.isOwner(ref));
      return tracker === undefined ? undefined : { tracker, key: tracker.keyOfOwner(obj.metadata.namespace, ref.name) };
    }
    return undefined;
  }

  #index(key: string, prev: ChildEntry | undefined, next: ChildEntry | undefined): void {
    if (prev?.owner) this.#byOwner.get(prev.owner.tracker)?.get(prev.owner.key)?.delete(key);
    if (prev?.owner && this.#byOwner.get(prev.owner.tracker)?.get(prev.owner.key)?.size === 0) this.#byOwner.get(prev.owner.tracker)?.delete(prev.owner.key);
    if (!next?.owner) return;
    let byKey = this.#byOwner.get(next.owner.tracker);
    if (!byKey) this.#byOwner.set(next.owner.tracker, (byKey = new Map<string, Set<string>>()));
    let set = byKey.get(next.owner.key);
    if (!set) byKey.set(next.owner.key, (set = new Set()));
    set.add(key);
  }

  async upsert(obj: KubeObject, via: Via, epoch = 0): Promise<void> {
    const m = obj.metadata;
    const key = keyOf(m.namespace, m.name);
    const prev = this.entries.get(key);
    const owner = this.#ownerOf(obj);
    // Objects of this kind that no watched parent controls are not remembered at all.
    if (owner === undefined && prev === undefined) return;
    const manager = this.o.functionFieldManager;
    const ownWrite = manager !== undefined && lastContentWriteWasApply(obj, manager);
    const hash = manager === undefined ? undefined : appliedHashOf(obj, manager);
    const gen = fenceOf(obj);
    const next: ChildEntry = {
      uid: m.uid,
      rv: m.resourceVersion,
      fp: fingerprint(obj, false),
      epoch,
      ...(owner ? { owner } : {}),
      ...(hash ? { hash } : {}),
      ...(gen === undefined ? {} : { gen }),
      ...(this.#includeStatus ? { sfp: statusFingerprint(obj) } : {}),
    };
    if (owner === undefined) this.entries.delete(key);
    else this.entries.set(key, next);
    this.#index(key, prev, owner === undefined ? undefined : next);
    const appeared = prev === undefined || prev.uid !== next.uid || prev.owner?.tracker !== owner?.tracker || prev.owner?.key !== owner?.key;
    if (via === "list" && prev === undefined) {
      // A new bridge's first list: a parent whose status records the children it left weighs them
      // all at once (releaseInitialWork, which also sees the ones gone). Else news to the parent
      // only if someone other than its function wrote the child after the function last wrote the
      // parent's status (parents are listed first).
      if (owner === undefined || owner.tracker.recordsReconciled(owner.key) || !this.#writtenSinceParentSaw(obj, owner)) return;
    } else if (!this.changed(prev, next) && prev?.sfp === next.sfp) return;
    // A child's modification by the function's own apply is the answer to its parent's last
    // event: not news. Its appearance is, even the function's own: the next event then carries
    // its key (so it can be pruned); that announcement waits a moment for the parent's status write.
    // A change of its status is always someone else's (its controller's): the function never writes it.
    if (!appeared && ownWrite && prev?.sfp === next.sfp) return;
    const cause = `child:${m.uid}:${m.resourceVersion}`;
    if (owner !== undefined) await owner.tracker.reannounce(owner.key, "child", cause, appeared && ownWrite ? { holdMs: OWN_CHILD_HOLD_MS } : {});
    // Adopted away or orphaned: the former owner must notice its child is no longer its own.
    if (prev?.owner !== undefined && (prev.owner.tracker !== owner?.tracker || prev.owner.key !== owner.key)) await prev.owner.tracker.reannounce(prev.owner.key, "child", cause);
  }

  #writtenSinceParentSaw(obj: KubeObject, owner: NonNullable<ChildEntry["owner"]>): boolean {
    const manager = this.o.functionFieldManager;
    const foreign = lastWriteOf(obj, (e) => !(e.manager === manager && e.operation === "Apply" && e.subresource === undefined) && (this.#includeStatus || e.subresource !== "status"));
    // managedFields times have one-second resolution: a write in the same second counts as news.
    return foreign > 0 && foreign >= owner.tracker.statusWrittenMs(owner.key);
  }

  async remove(obj: KubeObject): Promise<void> {
    const m = obj.metadata;
    const key = keyOf(m.namespace, m.name);
    const prev = this.entries.get(key);
    if (prev === undefined) return;
    this.entries.delete(key);
    this.#index(key, prev, undefined);
    if (prev.owner) await prev.owner.tracker.reannounce(prev.owner.key, "child", `child-gone:${m.uid}`, { holdMs: GONE_CHILD_HOLD_MS });
  }

  protected async vanished(key: string, entry: ChildEntry): Promise<void> {
    this.#index(key, entry, undefined);
    if (entry.owner) await entry.owner.tracker.reannounce(entry.owner.key, "child", `child-gone:${entry.uid}`);
  }
}
