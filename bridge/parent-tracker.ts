// The watched resources' objects: what the bridge remembers of each — uid, resourceVersion,
// generation, a fingerprint and when it is due, never a body (but, while a new bridge starts, the
// listed bodies of what needs work, within a budget) — and the decision of what to announce when
// an object (or a child of one: child-tracker.ts) changes, or falls due.
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
import { childrenDigest, metadataDigest, reconciledOf, type ChildMark, type Reconciled } from "../core/reconciled.ts";
import { referencesOf, type ReferenceRecord } from "../core/references.ts";
import { announceReason, NEXT_RECONCILE_FIELD, nextReconcileOf, type NextReconcile } from "../core/schedule.ts";
import { DueSchedule } from "./due-schedule.ts";
import type { KeptBodies } from "./kept-bodies.ts";
import { TimerTurns, TURN_RECHECK_MS, type Recorded } from "./timer-turns.ts";
import type { StartLine, StartWindow } from "./start-window.ts";
import { finalizersManagedBy, fingerprint, lastWriteOf, type WatchedObject } from "./watched-object.ts";
import type { AnnounceOptions, ResolvedResource, ScheduledBy, Via } from "./sink.ts";
import { groupOf, keyOf, splitKey } from "../core/resource-path.ts";
import { Tracker, type Entry, type TrackerOptions } from "./tracker.ts";

interface ParentEntry extends Entry {
  generation: number;
  /** The `at` of status.nextReconcile already announced or superseded: not announced again. */
  handled?: string;
  /** What the schedule holds for it: the status's `at`, the reason to announce it with, and (traced) what scheduled it. */
  pending?: { at: string; reason: string; scheduled?: ScheduledBy };
  /** When the function last wrote its status (ms; 0 if never): children written later by others are news to it. */
  statusWrittenMs: number;
  /** Its finalizers, apart from `fp`: adding the function's own finalizer is not news to it. */
  finalizers: readonly string[];
  /** What the function recorded it reconciled (status.reconciled); undefined when an older function wrote its status. */
  reconciled?: Reconciled;
}

/** How a watched resource's announcements carry its objects. */
export interface ParentOptions {
  /** Put the object in its announcements (up to maxBodyBytes). */
  bodies: boolean;
  maxBodyBytes: number;
  /**
   * A new bridge's first list: bodies of the objects needing work, kept (as JSON) until the
   * children's keys are known and they are announced, in this store, shared by the bridge's
   * resources; the rest are announced by their keys (their functions read them). None: none kept.
   */
  initialBodies?: KeptBodies;
  /** Paces the first list's announcements (start-window.ts), shared by the bridge's resources; none: all at once. */
  startWindow?: StartWindow;
}

/** A referenced kind's tracker (reference-tracker.ts), as a parent tracker tells it what an object read. */
export interface ReferenceIndex {
  refer(parent: ParentTracker, parentKey: string, records: readonly ReferenceRecord[]): Promise<void>;
}

/** An owned kind's tracker (child-tracker.ts), as a parent tracker reads its index of children. */
export interface ChildIndex {
  /** Learns that `parent` owns its kind, so that it indexes the children `parent`'s objects control. */
  serve(parent: ParentTracker): void;
  keysOf(parent: ParentTracker, parentKey: string): ChildKey[];
  marksOf(parent: ParentTracker, parentKey: string): ChildMark[];
  countOf(parent: ParentTracker, parentKey: string): number;
}

/**
 * How long an announcement caused by the function's own new child waits at most for the parent's
 * status write, which ends the wait (or, recording the child, drops it) — and how long a status
 * write that records children the index does not show yet waits for their watch events.
 */
export const OWN_CHILD_HOLD_MS = 5000;

const NO_FINALIZERS: readonly string[] = [];
const sameList = (a: readonly string[], b: readonly string[]): boolean => a.length === b.length && a.every((x, i) => x === b[i]);

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
function needsWork(obj: WatchedObject, entry: ParentEntry, functionFieldManager: string | undefined): boolean {
  const status = (obj as { status?: { observedGeneration?: unknown } }).status;
  const m = obj.metadata as WatchedObject["metadata"] & { deletionTimestamp?: string };
  if (status?.observedGeneration !== (m.generation ?? 0) || m.deletionTimestamp !== undefined) return true;
  if (entry.reconciled !== undefined) return entry.reconciled.metadata !== metadataDigest(obj);
  const statusWrittenMs = entry.statusWrittenMs;
  if (functionFieldManager === undefined || statusWrittenMs === 0) return false;
  return lastWriteOf(obj, (e) => e.subresource !== "status" && e.manager !== functionFieldManager) > statusWrittenMs;
}

/** What the object's status records that answers an announcement (timer-turns.ts). */
function recordedOf(obj: WatchedObject): Recorded {
  const status = (obj as { status?: { observedGeneration?: unknown } }).status;
  const observed = status?.observedGeneration;
  return { at: nextReconcileOf(status)?.at, observedGeneration: typeof observed === "number" ? observed : undefined };
}

const TRACEPARENT = /^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$/;

/**
 * What fell due, for its trace: what the status's schedule says, and the trace of the change whose
 * reconcile recorded it — the function's own context beside the due time
 * (status.nextReconcile.traceparent), if it wrote one, else the change last sent for the object,
 * which that status write answers (a change sent after it but before the write would be taken
 * instead; the function's field is exact). A schedule recorded as the operator's timer says so
 * (status.nextReconcile.timer); otherwise a timer and requeueAfterSeconds are alike (Requeue).
 */
function scheduledBy(status: unknown, next: NextReconcile, lastSent: string | undefined): ScheduledBy {
  const raw = (status as Record<string, { traceparent?: unknown; timer?: unknown } | undefined>)[NEXT_RECONCILE_FIELD];
  const kind = next.reason === "Requeue" ? (raw?.timer === true ? "timer" : "requeue") : "retry";
  const own = typeof raw?.traceparent === "string" && TRACEPARENT.test(raw.traceparent) ? raw.traceparent : undefined;
  const traceparent = own ?? lastSent;
  return traceparent === undefined ? { kind } : { kind, traceparent };
}

/** What a status records of the function's last reconcile, as a ParentEntry holds it. */
function reconciledEntry(status: unknown): Pick<ParentEntry, "reconciled"> {
  const reconciled = reconciledOf(status);
  return reconciled === undefined ? {} : { reconciled };
}

/** The object as announced: everything the API server returned but managedFields, which no reconcile reads. */
function announcedBody(obj: WatchedObject, maxBytes: number): KeyEvent["object"] {
  const { managedFields: _dropped, ...metadata } = obj.metadata as WatchedObject["metadata"] & { managedFields?: unknown };
  const body = { ...obj, metadata };
  return Buffer.byteLength(JSON.stringify(body), "utf8") <= maxBytes ? body : undefined;
}

export class ParentTracker extends Tracker<ParentEntry> {
  readonly #includeStatus: boolean;
  readonly #due: DueSchedule;
  /** Fair turns for its objects' timers under a backlog. */
  readonly #turns: TimerTurns;
  readonly #parentOptions: ParentOptions;
  readonly #children: ChildIndex[] = [];
  readonly #reads: ReferenceIndex[] = [];
  /** Objects its first list found needing work, announced once the children's keys are known; undefined after. */
  #initialWork: Set<string> | undefined = new Set();
  /** Handles of the bodies of initial work as listed, kept in initialBodies: their first reconciles need not read them. */
  readonly #initialBodies = new Map<string, number>();
  /**
   * Initial work not yet announced (a change of its own announces it first): waiting in the start
   * window's line, in list order, or taken by the window and its announcement not yet run. Only
   * the keys the entries hold: the line costs a set entry per object, not a closure.
   */
  readonly #startWaiting = new Set<string>();
  readonly #startTaken = new Set<string>();

  constructor(resource: ResolvedResource, options: TrackerOptions, parentOptions: ParentOptions = { bodies: true, maxBodyBytes: 64 * 1024 }) {
    super(resource, options);
    this.#includeStatus = !options.skipStatusOnly;
    this.#parentOptions = parentOptions;
    this.#due = new DueSchedule({ now: () => options.now().getTime(), timers: options.timers, onDue: (key) => void this.#fire(key) });
    this.#turns = new TimerTurns(() => options.now().getTime());
  }

  /** Its owned kinds' trackers, whose keys its announcements carry. */
  owns(child: ChildIndex): void {
    this.#children.push(child);
    child.serve(this);
  }

  /** The trackers of the kinds its objects reference, which index what their status records. */
  reads(tracker: ReferenceIndex): void {
    this.#reads.push(tracker);
  }

  /** Tells the referenced kinds' trackers what an object's status records it read ([] once it is gone). */
  async #refer(key: string, obj: WatchedObject | undefined): Promise<void> {
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

  #event(key: string, e: Pick<ParentEntry, "uid" | "rv" | "generation">, type: KeyEvent["type"], reason: string, obj?: WatchedObject): KeyEvent {
    const [namespace, name] = splitKey(key);
    const r = this.resource;
    const object = type !== "DELETED" && obj !== undefined && this.#parentOptions.bodies ? announcedBody(obj, this.#parentOptions.maxBodyBytes) : undefined;
    return {
      v: 2,
      cluster: this.options.cluster,
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
      observedAt: this.options.now().toISOString(),
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

  async upsert(obj: WatchedObject, via: Via, epoch = 0): Promise<void> {
    await this.#upsert(obj, via, epoch);
    await this.#refer(keyOf(obj.metadata.namespace, obj.metadata.name), obj);
  }

  async #upsert(obj: WatchedObject, via: Via, epoch: number): Promise<void> {
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
      statusWrittenMs:
        this.options.functionFieldManager === undefined
          ? 0
          : lastWriteOf(obj, (e) => e.manager === this.options.functionFieldManager && e.subresource === "status"),
      ...reconciledEntry((obj as { status?: unknown }).status),
      ...(prev?.uid === m.uid && prev.handled !== undefined ? { handled: prev.handled } : {}),
      ...(prev?.uid === m.uid && prev.pending !== undefined ? { pending: prev.pending } : {}),
    };
    this.entries.set(key, next);
    this.#turns.seen(key, () => recordedOf(obj));
    if (prev !== undefined) this.#answered(key, prev, next, obj);
    // A new bridge knows nothing of what was announced before it: it announces what needs work,
    // once its children's keys are known (releaseInitialWork).
    if (via === "list" && prev === undefined && this.#initialWork !== undefined) {
      if (needsWork(obj, next, this.options.functionFieldManager)) {
        this.#initialWork.add(key);
        this.#keepInitialBody(key, obj);
      }
      return this.#schedule(key, next, obj);
    }
    const announce = via === "list" && prev === undefined ? needsWork(obj, next, this.options.functionFieldManager) : this.#parentChanged(prev, next, obj);
    if (!announce) {
      await this.#statusWritten(key, prev, next, obj);
      return this.#schedule(key, next, obj);
    }
    // What its status has due is superseded too: the reconcile this announces records it afresh.
    const due = nextReconcileOf((obj as { status?: unknown }).status);
    if (due !== undefined) next.handled = due.at;
    const type = prev === undefined || prev.uid !== next.uid ? "ADDED" : "MODIFIED";
    if (recordedOf(obj).observedGeneration !== next.generation) this.#turns.sent(key, { generation: next.generation });
    await this.#announce(key, next, type, via, "", {}, obj);
  }

  /**
   * A change that is not news (the function's own status write, most often). An announcement still
   * waiting to be sent gets this newer body, so its reconcile need not read the object again —
   * unless the status records the children as the index knows them: then a held announcement of
   * the function's own child writes is answered, and dropped (no second reconcile of a new object).
   * A newly recorded set the index does not show is announced, held: the child's watch may lag
   * (its event then matches the record and withdraws it), or a child changed after the function
   * read it, which is news once the hold ends.
   */
  async #statusWritten(key: string, prev: ParentEntry | undefined, next: ParentEntry, obj: WatchedObject): Promise<void> {
    const publishKey = this.#publishKey(key);
    const bodies = this.#parentOptions.bodies;
    if (this.recordsChildren(key)) {
      await this.options.announce(publishKey, this.#event(key, next, "MODIFIED", "watch", obj), "", { withdrawHeld: true, onlyIfPending: bodies });
      return;
    }
    const recorded = next.reconciled?.children;
    // A record of fewer children than the index holds: the prune that follows the write decides (pruneUnderWay).
    if (recorded !== undefined && prev?.uid === next.uid && prev.reconciled?.children !== recorded && !this.pruneUnderWay(key)) {
      await this.#announce(key, next, "MODIFIED", "child", `recorded:${next.rv}`, { holdMs: OWN_CHILD_HOLD_MS }, obj);
      return;
    }
    if (bodies) await this.options.announce(publishKey, this.#event(key, next, "MODIFIED", "watch", obj), "", { onlyIfPending: true });
  }

  /**
   * Whether a parent's change is news to its function. The function adding its own finalizer
   * (before its first reconcile, which goes on in the same call) is not: announcing it would
   * reconcile the object a second time for nothing. Any other finalizer change is news.
   */
  #parentChanged(prev: ParentEntry | undefined, next: ParentEntry, obj: WatchedObject): boolean {
    if (this.changed(prev, next)) return true;
    if (prev === undefined || !this.options.skipStatusOnly || sameList(prev.finalizers, next.finalizers)) return false;
    const manager = this.options.functionFieldManager;
    const added = next.finalizers.filter((f) => !prev.finalizers.includes(f));
    if (manager === undefined || added.length === 0 || prev.finalizers.some((f) => !next.finalizers.includes(f))) return true;
    const own = finalizersManagedBy(obj, manager);
    return !added.every((f) => own.has(f));
  }

  /**
   * Schedules what the object's status asks for, unless it was announced (or superseded) already;
   * announces it now when it is due.
   */
  async #schedule(key: string, entry: ParentEntry, obj: WatchedObject): Promise<void> {
    const status = (obj as { status?: unknown }).status;
    const next = nextReconcileOf(status);
    if (next === undefined || next.at === entry.handled) {
      if (next === undefined) this.#due.clear(key);
      return;
    }
    const atMs = Date.parse(next.at);
    const now = this.options.now().getTime();
    // Taken when the status write that records it is seen (what was sent last is then what it
    // answers), and only when traced: untraced, a pending schedule costs no more than before.
    const traceOf = this.options.traceOf;
    const scheduled = traceOf && (entry.pending?.at === next.at ? entry.pending.scheduled : scheduledBy(status, next, traceOf(this.#publishKey(key))));
    if (atMs > now || this.#turns.mustWait(key)) {
      entry.pending = { at: next.at, reason: announceReason(next), ...(scheduled ? { scheduled } : {}) };
      this.#due.set(key, Math.max(atMs, now + (atMs > now ? 0 : TURN_RECHECK_MS)));
      return;
    }
    entry.handled = next.at;
    delete entry.pending;
    this.#due.clear(key);
    this.#turns.sent(key, { at: next.at });
    const event = this.#event(key, entry, "RESYNC", announceReason(next), obj);
    await this.options.announce(this.#publishKey(key), event, `due:${next.at}`, scheduled ? { scheduled } : {});
  }

  /** The schedule fired: announce the object for the reason its status gives, or wait its turn. */
  async #fire(key: string): Promise<void> {
    const entry = this.entries.get(key);
    const pending = entry?.pending;
    if (entry === undefined || pending === undefined) return;
    if (this.#turns.mustWait(key)) {
      this.options.onTimerHeld?.();
      this.#due.set(key, this.options.now().getTime() + TURN_RECHECK_MS);
      return;
    }
    entry.handled = pending.at;
    delete entry.pending;
    this.#turns.sent(key, { at: pending.at });
    const options = pending.scheduled ? { scheduled: pending.scheduled } : {};
    await this.options.announce(this.#publishKey(key), this.#event(key, entry, "RESYNC", pending.reason), `due:${pending.at}`, options);
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
    for (const key of work) this.#startWaiting.add(key);
    const line = this.#startLine();
    const window = this.#parentOptions.startWindow;
    if (window !== undefined) return window.add(line);
    for (let next = line.take(); next !== undefined; next = line.take()) await next.release();
  }

  /**
   * The line of initial work as the start window takes from it. One iterator for the line's life:
   * taking from a fresh iterator each time would walk the deleted entries at the set's front again.
   */
  #startLine(): StartLine {
    const waiting = this.#startWaiting;
    const cursor = waiting.values();
    return {
      get size() {
        return waiting.size;
      },
      take: () => {
        const next = cursor.next();
        if (next.done === true) return undefined;
        const key = next.value;
        waiting.delete(key);
        this.#startTaken.add(key);
        return { id: this.#publishKey(key), release: () => this.#releaseOne(key) };
      },
    };
  }

  /** Takes an object's initial work out of the start, announced otherwise or gone; true if it was still to be announced. */
  #leaveStart(key: string): boolean {
    const queued = this.#startWaiting.delete(key) || this.#startTaken.delete(key);
    if (!queued) return false;
    this.#dropInitialBody(key);
    this.#parentOptions.startWindow?.settle(this.#publishKey(key));
    return true;
  }

  /** An object gone: out of the start's line, or its slot freed. */
  #goneFromStart(key: string): void {
    const window = this.#parentOptions.startWindow;
    if (this.#leaveStart(key) || window === undefined || window.open === 0) return;
    const id = this.#publishKey(key);
    if (window.isOpen(id)) window.settle(id);
  }

  /** Announces one object of the first list's work, unless a change of its own announced it meanwhile. */
  async #releaseOne(key: string): Promise<void> {
    if (!this.#startTaken.delete(key)) return;
    const entry = this.entries.get(key);
    const json = this.#takeInitialBody(key);
    if (entry === undefined) {
      this.#parentOptions.startWindow?.settle(this.#publishKey(key));
      return;
    }
    // Only the version the entry holds: a body is never older than the event that carries it.
    const listed = json === undefined ? undefined : (JSON.parse(json) as WatchedObject);
    await this.#announce(key, entry, "ADDED", "list", "", {}, listed?.metadata.resourceVersion === entry.rv ? listed : undefined);
  }

  /**
   * Frees the start window's slot of an object its first list announced once its function answers:
   * a status write of the function's, or a status that no longer needs work. One still waiting
   * that its function answers (a message from before this bridge) leaves the line unannounced.
   */
  #answered(key: string, prev: ParentEntry, next: ParentEntry, obj: WatchedObject): void {
    const window = this.#parentOptions.startWindow;
    // Past a start, every watch event passes here: nothing to free, and no key to build.
    if (window === undefined || (window.open === 0 && this.#startWaiting.size === 0 && this.#startTaken.size === 0)) return;
    const written = prev.uid !== next.uid || next.statusWrittenMs > prev.statusWrittenMs;
    if (this.#startWaiting.has(key) || this.#startTaken.has(key)) {
      if (written) this.#leaveStart(key);
      return;
    }
    const id = this.#publishKey(key);
    if (window.isOpen(id) && (written || !needsWork(obj, next, this.options.functionFieldManager))) window.settle(id);
  }

  /** Keeps a listed body of initial work while the store has room. */
  #keepInitialBody(key: string, obj: WatchedObject): void {
    const store = this.#parentOptions.initialBodies;
    if (!this.#parentOptions.bodies || store === undefined || store.limit === 0) return;
    // Gone and listed again within the first list, a key still holds its earlier body's room.
    this.#dropInitialBody(key);
    const body = announcedBody(obj, this.#parentOptions.maxBodyBytes);
    const handle = body === undefined ? undefined : store.keep(JSON.stringify(body));
    if (handle !== undefined) this.#initialBodies.set(key, handle);
  }

  #takeInitialBody(key: string): string | undefined {
    const handle = this.#initialBodies.get(key);
    if (handle === undefined) return undefined;
    this.#initialBodies.delete(key);
    return this.#parentOptions.initialBodies!.take(handle);
  }

  #dropInitialBody(key: string): void {
    const handle = this.#initialBodies.get(key);
    if (handle === undefined) return;
    this.#initialBodies.delete(key);
    this.#parentOptions.initialBodies!.drop(handle);
  }

  /**
   * Every announcement of an object supersedes what it had due and the first list's verdict: its
   * reconcile records the schedule afresh. A held one does not, since it may yet be withdrawn.
   */
  async #announce(
    key: string,
    entry: ParentEntry,
    type: KeyEvent["type"],
    reason: string,
    cause: string,
    options: AnnounceOptions = {},
    obj?: WatchedObject,
  ): Promise<void> {
    if (options.holdMs !== undefined && options.holdMs > 0) {
      await this.options.announce(this.#publishKey(key), this.#event(key, entry, type, reason, obj), cause, options);
      return;
    }
    if (this.#initialWork?.delete(key)) this.#dropInitialBody(key);
    this.#leaveStart(key);
    if (entry.pending !== undefined) {
      this.#due.clear(key);
      entry.handled = entry.pending.at;
      delete entry.pending;
    }
    await this.options.announce(this.#publishKey(key), this.#event(key, entry, type, reason, obj), cause, options);
  }

  async remove(obj: WatchedObject): Promise<void> {
    const m = obj.metadata;
    const key = keyOf(m.namespace, m.name);
    this.entries.delete(key);
    this.#due.clear(key);
    this.#turns.gone(key);
    this.#goneFromStart(key);
    await this.#refer(key, undefined);
    const e = { uid: m.uid, rv: m.resourceVersion, generation: m.generation ?? 0 };
    await this.options.announce(this.#publishKey(key), this.#event(key, e, "DELETED", "watch"), "deleted");
  }

  protected async vanished(key: string, entry: ParentEntry): Promise<void> {
    this.#due.clear(key);
    this.#turns.gone(key);
    this.#goneFromStart(key);
    await this.#refer(key, undefined);
    // Its last known version was announced already; "deleted" keeps this one from being deduplicated away.
    await this.options.announce(this.#publishKey(key), this.#event(key, entry, "DELETED", "relist"), "deleted");
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

  /**
   * Whether the object's status records its children exactly as the index knows them now: the
   * function's last reconcile left these, so no change among them is news to it.
   */
  recordsChildren(key: string): boolean {
    const recorded = this.entries.get(key)?.reconciled;
    // The count first: a parent of thousands of children is not digested at each child's event.
    return recorded !== undefined && recorded.childCount === this.#childCount(key) && recorded.children === childrenDigest(this.#marksOf(key));
  }

  /**
   * Whether the function's prune of this object's children is still under way: its status records
   * fewer children than the index still holds (it writes its status, then deletes). A child gone
   * meanwhile is one of the prune's, or is judged when the last of them goes (recordsChildren).
   */
  pruneUnderWay(key: string): boolean {
    const recorded = this.entries.get(key)?.reconciled;
    return recorded !== undefined && this.#childCount(key) > recorded.childCount;
  }

  /** A child change its status already records: a held announcement of the object is answered, and dropped. */
  async withdrawHeld(key: string): Promise<void> {
    const entry = this.entries.get(key);
    if (entry === undefined) return;
    await this.options.announce(this.#publishKey(key), this.#event(key, entry, "MODIFIED", "child"), "", { withdrawHeld: true });
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
