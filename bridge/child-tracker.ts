// The objects of each owned kind that carry crdfn's parent label, indexed by their controller
// owner: the keys an announcement of a parent carries. A child is not announced itself: its
// change announces its controller owner, the object a function reconciles, unless the change is
// the function's own answer to that parent's last event.
import type { ChildKey } from "../core/event.ts";
import { fenceOf } from "../core/fence.ts";
import { appliedHashOf, childToken, type ChildMark } from "../core/reconciled.ts";
import { fingerprint, lastContentWriteWasApply, lastWriteOf, statusFingerprint, type WatchedObject } from "./watched-object.ts";
import { OWN_CHILD_HOLD_MS, type ChildIndex, type ParentTracker } from "./parent-tracker.ts";
import type { ResolvedResource, Via } from "./sink.ts";
import { keyOf, splitKey } from "../core/resource-path.ts";
import { Tracker, type Entry, type TrackerOptions } from "./tracker.ts";

// How long an announcement of the function's own new child waits at most for the parent's status
// write: the parent's tracker holds one for as long when that write records what it has not seen yet.
export { OWN_CHILD_HOLD_MS } from "./parent-tracker.ts";

/**
 * How long a child's disappearance waits at most before its parent is announced, so that deletes
 * by others come as one announcement a second, not one message per child. The function's own
 * prune announces nothing while it is under way (ParentTracker.pruneUnderWay), and nothing at its
 * end when the index then holds what the status records. The parent's status write ends the wait.
 */
export const GONE_CHILD_HOLD_MS = 1000;

/**
 * A parent's children of one kind, by key: one key alone, as most parents have, or a set. A set
 * for each parent cost about 290 bytes (its hash table) of the ~700 a child took at 100k.
 */
type Owned = string | Set<string>;

const ownedKeys = (owned: Owned | undefined): Iterable<string> => (owned === undefined ? [] : typeof owned === "string" ? [owned] : owned);

function withKey(owned: Owned | undefined, key: string): Owned {
  if (owned === undefined || owned === key) return key;
  if (typeof owned === "string") return new Set([owned, key]);
  return owned.add(key);
}

/** What is left once `key` goes; undefined when nothing is. */
function withoutKey(owned: Owned | undefined, key: string): Owned | undefined {
  if (owned === undefined || owned === key) return undefined;
  if (typeof owned === "string") return owned;
  owned.delete(key);
  return owned.size === 1 ? owned.values().next().value : owned.size === 0 ? undefined : owned;
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
export class ChildTracker extends Tracker<ChildEntry> implements ChildIndex {
  readonly #parents: ParentTracker[] = [];
  readonly #byOwner = new Map<ParentTracker, Map<string, Owned>>();
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
    const out: ChildKey[] = [];
    for (const key of ownedKeys(this.#byOwner.get(parent)?.get(parentKey))) {
      const e = this.entries.get(key);
      if (e === undefined) continue;
      const [namespace, name] = splitKey(key);
      out.push({
        apiVersion: this.#apiVersion,
        kind: this.resource.kind,
        ...(namespace === undefined ? {} : { namespace }),
        name,
        uid: e.uid,
        resourceVersion: e.rv,
        ...(e.hash === undefined ? {} : { appliedHash: e.hash }),
        ...(e.gen === undefined ? {} : { parentGeneration: e.gen }),
      });
    }
    return out;
  }

  /** A parent's current children of this kind, each by uid and token (core/reconciled.ts). */
  marksOf(parent: ParentTracker, parentKey: string): ChildMark[] {
    const out: ChildMark[] = [];
    for (const key of ownedKeys(this.#byOwner.get(parent)?.get(parentKey))) {
      const e = this.entries.get(key);
      if (e !== undefined) out.push({ uid: e.uid, token: childToken(e.hash, e.fp) });
    }
    return out;
  }

  /** How many current children of this kind a parent has. */
  countOf(parent: ParentTracker, parentKey: string): number {
    const owned = this.#byOwner.get(parent)?.get(parentKey);
    return owned === undefined ? 0 : typeof owned === "string" ? 1 : owned.size;
  }

  protected override changed(prev: ChildEntry | undefined, next: ChildEntry): boolean {
    return super.changed(prev, next) || prev?.owner?.tracker !== next.owner?.tracker || prev?.owner?.key !== next.owner?.key;
  }

  #ownerOf(obj: WatchedObject): ChildEntry["owner"] {
    for (const ref of obj.metadata.ownerReferences ?? []) {
      if (ref.controller !== true) continue;
      const tracker = this.#parents.find((p) => p.isOwner(ref));
      return tracker === undefined ? undefined : { tracker, key: tracker.keyOfOwner(obj.metadata.namespace, ref.name) };
    }
    return undefined;
  }

  #index(key: string, prev: ChildEntry | undefined, next: ChildEntry | undefined): void {
    const before = prev?.owner && this.#byOwner.get(prev.owner.tracker);
    if (prev?.owner && before) {
      const left = withoutKey(before.get(prev.owner.key), key);
      if (left === undefined) before.delete(prev.owner.key);
      else before.set(prev.owner.key, left);
    }
    if (!next?.owner) return;
    let byKey = this.#byOwner.get(next.owner.tracker);
    if (!byKey) this.#byOwner.set(next.owner.tracker, (byKey = new Map<string, Owned>()));
    byKey.set(next.owner.key, withKey(byKey.get(next.owner.key), key));
  }

  async upsert(obj: WatchedObject, via: Via, epoch = 0): Promise<void> {
    const m = obj.metadata;
    const key = keyOf(m.namespace, m.name);
    const prev = this.entries.get(key);
    const owner = this.#ownerOf(obj);
    // Objects of this kind that no watched parent controls are not remembered at all.
    if (owner === undefined && prev === undefined) return;
    const manager = this.options.functionFieldManager;
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
    const cause = `child:${m.uid}:${m.resourceVersion}`;
    // Adopted away or orphaned: the former owner must notice its child is no longer its own.
    if (prev?.owner !== undefined && (prev.owner.tracker !== owner?.tracker || prev.owner.key !== owner.key))
      await prev.owner.tracker.reannounce(prev.owner.key, "child", cause);
    if (owner === undefined) return;
    // A change of its status is always someone else's (its controller's): the function never writes
    // it, nor records it, so it is news. Any other change that leaves the children exactly as the
    // parent's status records them (the function's own apply, seen after its status write) is not:
    // it answers a held announcement too.
    const statusChanged = !appeared && prev?.sfp !== next.sfp;
    if (!statusChanged && owner.tracker.recordsChildren(owner.key)) return owner.tracker.withdrawHeld(owner.key);
    // A child's modification by the function's own apply is the answer to its parent's last
    // event: not news. Its appearance is, even the function's own, until the parent's status
    // write records it: that announcement waits a moment for it (and is dropped if it does); if
    // it never does, the next event carries the child's key from the index, so it can be pruned.
    if (!appeared && ownWrite && !statusChanged) return;
    await owner.tracker.reannounce(owner.key, "child", cause, appeared && ownWrite ? { holdMs: OWN_CHILD_HOLD_MS } : {});
  }

  #writtenSinceParentSaw(obj: WatchedObject, owner: NonNullable<ChildEntry["owner"]>): boolean {
    const manager = this.options.functionFieldManager;
    const foreign = lastWriteOf(
      obj,
      (e) => !(e.manager === manager && e.operation === "Apply" && e.subresource === undefined) && (this.#includeStatus || e.subresource !== "status"),
    );
    // managedFields times have one-second resolution: a write in the same second counts as news.
    return foreign > 0 && foreign >= owner.tracker.statusWrittenMs(owner.key);
  }

  async remove(obj: WatchedObject): Promise<void> {
    const m = obj.metadata;
    const key = keyOf(m.namespace, m.name);
    const prev = this.entries.get(key);
    if (prev === undefined) return;
    this.entries.delete(key);
    this.#index(key, prev, undefined);
    if (prev.owner === undefined) return;
    // The function's prune, seen after its status write recorded the children it left: not news.
    if (prev.owner.tracker.recordsChildren(prev.owner.key)) return prev.owner.tracker.withdrawHeld(prev.owner.key);
    // One of a prune's thousands of deletes: the one that brings the index to the record decides.
    if (prev.owner.tracker.pruneUnderWay(prev.owner.key)) return;
    await prev.owner.tracker.reannounce(prev.owner.key, "child", `child-gone:${m.uid}`, { holdMs: GONE_CHILD_HOLD_MS });
  }

  protected async vanished(key: string, entry: ChildEntry): Promise<void> {
    this.#index(key, entry, undefined);
    if (entry.owner) await entry.owner.tracker.reannounce(entry.owner.key, "child", `child-gone:${entry.uid}`);
  }
}
