// The objects of one referenced kind (one watch per kind, whichever operators read it, as
// metadata only: a Secret's data never reaches the bridge), and a keys-only index from each
// referenced object to the objects whose status records they read it, with the version they read.
// An object is announced (reason "reference") when what it references is no longer what it read:
//   - the referenced object changes, appears or goes (this kind's watch);
//   - its status records a version that is not the one this bridge knows (the object changed
//     between the function's read and the status write that told the bridge about the reference;
//     or, rarely, the bridge is a moment behind: one reconcile too many, which changes nothing);
//   - a new bridge's first list finds it changed while no bridge watched.
// Nothing runs user code here: the names come from the status the functions write.
import type { ReferenceRecord } from "../core/references.ts";
import type { WatchedObject } from "./watched-object.ts";
import type { ParentTracker, ReferenceIndex } from "./parent-tracker.ts";
import type { ResolvedResource, Via } from "./sink.ts";
import { keyOf } from "../core/resource-path.ts";
import { inScope, Tracker, type Entry, type TrackerOptions } from "./tracker.ts";

/** Per referencing parent tracker: parent key → the version it read (undefined: it was absent). */
type Readers = Map<ParentTracker, Map<string, string | undefined>>;

const ALL = "*";

export class ReferenceTracker extends Tracker<Entry> implements ReferenceIndex {
  readonly #apiVersion: string;
  /** Referenced object's key → who read it, and which version. */
  readonly #byRef = new Map<string, Readers>();
  /** Parent tracker → parent key → the referenced keys it records (to replace them as a whole). */
  readonly #byParent = new Map<ParentTracker, Map<string, Set<string>>>();
  /** Namespace scopes (ALL for every namespace) whose first list is complete: only there is a comparison meaningful. */
  readonly #listed = new Set<string>();

  constructor(resource: ResolvedResource, options: TrackerOptions) {
    super(resource, options);
    this.#apiVersion = resource.group === "" ? resource.version : `${resource.group}/${resource.version}`;
  }

  /** How many objects reference one of this kind (for tests). */
  get indexed(): number {
    return this.#byRef.size;
  }

  #isListed(key: string): boolean {
    if (this.#listed.has(ALL)) return true;
    const namespace = key.slice(0, key.indexOf("/"));
    return namespace !== "" && this.#listed.has(namespace);
  }

  /**
   * What a parent's status records now (all its records: those of other kinds are ignored here).
   * A record that is new or changed, and names a version other than the one this bridge knows,
   * announces the parent.
   */
  async refer(parent: ParentTracker, parentKey: string, records: readonly ReferenceRecord[]): Promise<void> {
    const next = new Map<string, string | undefined>();
    for (const r of records) {
      if (r.apiVersion !== this.#apiVersion || r.kind !== this.resource.kind) continue;
      next.set(keyOf(this.resource.namespaced ? r.namespace : undefined, r.name), r.resourceVersion);
    }
    let byKey = this.#byParent.get(parent);
    const before = byKey?.get(parentKey);
    if (before === undefined && next.size === 0) return;
    for (const refKey of before ?? []) if (!next.has(refKey)) this.#unindex(refKey, parent, parentKey);
    let stale: string | undefined;
    for (const [refKey, rv] of next) {
      let readers = this.#byRef.get(refKey);
      if (readers === undefined) this.#byRef.set(refKey, (readers = new Map<ParentTracker, Map<string, string | undefined>>()));
      let read = readers.get(parent);
      if (read === undefined) readers.set(parent, (read = new Map<string, string | undefined>()));
      const recordedBefore = read.has(parentKey);
      const rvBefore = read.get(parentKey);
      read.set(parentKey, rv);
      if ((!recordedBefore || rvBefore !== rv) && this.#isListed(refKey) && this.entries.get(refKey)?.rv !== rv) stale ??= refKey;
    }
    if (next.size === 0) byKey?.delete(parentKey);
    else {
      if (byKey === undefined) this.#byParent.set(parent, (byKey = new Map<string, Set<string>>()));
      byKey.set(parentKey, new Set(next.keys()));
    }
    if (stale !== undefined) await parent.reannounce(parentKey, "reference", `ref:${this.resource.plural}:${stale}:${this.entries.get(stale)?.rv ?? "none"}`);
  }

  #unindex(refKey: string, parent: ParentTracker, parentKey: string): void {
    const readers = this.#byRef.get(refKey);
    const read = readers?.get(parent);
    read?.delete(parentKey);
    if (read?.size === 0) readers?.delete(parent);
    if (readers?.size === 0) this.#byRef.delete(refKey);
  }

  /** Announces every object that read `refKey` at a version other than `rv` (undefined: it is gone). */
  async #announceReaders(refKey: string, rv: string | undefined, cause: string): Promise<void> {
    for (const [parent, read] of this.#byRef.get(refKey) ?? []) {
      for (const [parentKey, recorded] of [...read]) if (recorded !== rv) await parent.reannounce(parentKey, "reference", cause);
    }
  }

  // Every object of the kind is remembered (uid and version, a few dozen bytes), referenced or
  // not: a status naming it later is compared with what it is now.
  async upsert(obj: WatchedObject, _via: Via, epoch = 0): Promise<void> {
    const m = obj.metadata;
    const key = keyOf(this.resource.namespaced ? m.namespace : undefined, m.name);
    const prev = this.entries.get(key);
    this.entries.set(key, { uid: m.uid, rv: m.resourceVersion, fp: "", epoch });
    if (!this.#isListed(key) || (prev?.uid === m.uid && prev.rv === m.resourceVersion)) return;
    await this.#announceReaders(key, m.resourceVersion, `ref:${m.uid}:${m.resourceVersion}`);
  }

  async remove(obj: WatchedObject): Promise<void> {
    const m = obj.metadata;
    const key = keyOf(this.resource.namespaced ? m.namespace : undefined, m.name);
    if (!this.entries.delete(key)) return;
    await this.#announceReaders(key, undefined, `ref-gone:${m.uid}`);
  }

  protected async vanished(key: string, entry: Entry): Promise<void> {
    await this.#announceReaders(key, undefined, `ref-gone:${entry.uid}`);
  }

  /**
   * After a complete list. The first one of a scope compares every index entry there with what
   * the list found: what changed, appeared or went while no bridge watched announces its readers.
   */
  override async sweep(namespace: string | undefined, epoch: number): Promise<void> {
    const scope = namespace ?? ALL;
    if (this.#listed.has(scope)) return super.sweep(namespace, epoch);
    await super.sweep(namespace, epoch);
    this.#listed.add(scope);
    for (const refKey of [...this.#byRef.keys()]) {
      if (!inScope(refKey, namespace)) continue;
      const e = this.entries.get(refKey);
      await this.#announceReaders(refKey, e?.rv, `ref-list:${e?.uid ?? "none"}:${e?.rv ?? "none"}`);
    }
  }
}
