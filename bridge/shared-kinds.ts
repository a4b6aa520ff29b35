// The kinds other than the watched resources: the kinds they own (their children) and the kinds
// they read (referenced objects). Each is watched once, whichever watched resources name it, into
// one tracker that every naming resource's ParentTracker links to. A kind's list waits for the
// lists of the resources naming it: what it finds is weighed against what their objects' status
// records (when it was last written, which children and references it recorded).
import type { GroupVersionResource } from "../core/resource-path.ts";
import { ChildTracker } from "./child-tracker.ts";
import type { BridgeConfig, WatchedResource } from "./config.ts";
import { resolveResource } from "./discovery.ts";
import { ReferenceTracker } from "./reference-tracker.ts";
import { reflectScopes, type ReflectorContext } from "./reflector.ts";
import type { ObjectSink, ResolvedResource } from "./sink.ts";
import type { TrackerOptions } from "./tracker.ts";

/** A kind watched once whichever resources name it. */
export interface SharedKind<T> {
  tracker: Promise<T>;
  /** Its first list is done in every namespace. */
  listed: Promise<void>;
}

export interface SharedKindsOptions {
  config: BridgeConfig;
  reflectors: ReflectorContext;
  /** The namespace scopes watched (undefined: all namespaces). */
  scopes: ReadonlyArray<string | undefined>;
  trackerOptions: TrackerOptions;
  /** Counts a failed discovery of a kind (crdfn_bridge_discovery_failures_total). */
  onFailed: (resource: string) => (code: number | undefined) => void;
  /** Resolves once a watched resource has listed its own objects (or turned out not served). */
  listedOwn: (resource: WatchedResource) => Promise<void>;
}

const gvr = (r: GroupVersionResource): string => `${r.group}/${r.version}/${r.plural}`;

export class SharedKinds {
  readonly #options: SharedKindsOptions;
  readonly #childKinds = new Map<string, SharedKind<ChildTracker>>();
  readonly #referenceKinds = new Map<string, SharedKind<ReferenceTracker>>();

  constructor(options: SharedKindsOptions) {
    this.#options = options;
  }

  /**
   * An owned kind: only its objects carrying crdfn's parent label (the functions label every child
   * they apply). A new bridge's first list of a child weighs it against when its parent's status
   * was last written (child-tracker.ts), hence after the parents' list.
   */
  childKind(owned: GroupVersionResource): SharedKind<ChildTracker> {
    const { config, trackerOptions } = this.#options;
    return this.#shared(
      this.#childKinds,
      owned,
      (r) => r.owns,
      (resolved) => new ChildTracker(resolved, config.childStatus === "announce", trackerOptions),
      (children, listedNow) => this.#reflect(children, config.childLabelSelector, listedNow, false),
      "an owned kind",
    );
  }

  /**
   * A referenced kind: every object (not only labelled ones: nobody labels a Secret for us), as
   * metadata only, after the objects that read it, whose status says what they reference.
   */
  referenceKind(read: GroupVersionResource): SharedKind<ReferenceTracker> {
    return this.#shared(
      this.#referenceKinds,
      read,
      (r) => r.reads ?? [],
      (resolved) => new ReferenceTracker(resolved, this.#options.trackerOptions),
      (references, listedNow) => this.#reflect(references, "", listedNow, true),
      "a referenced kind",
    );
  }

  #reflect(sink: ObjectSink, labelSelector: string, onSynced: () => void, metadataOnly: boolean): Array<Promise<void>> {
    return reflectScopes(this.#options.reflectors, this.#options.scopes, sink, labelSelector, { onSynced, metadataOnly });
  }

  /** The kind `ref` in `kinds`, watched from its first call on, once every resource naming it (`named`) has listed. */
  #shared<T extends ObjectSink>(
    kinds: Map<string, SharedKind<T>>,
    ref: GroupVersionResource,
    named: (r: WatchedResource) => readonly GroupVersionResource[],
    trackerOf: (resolved: ResolvedResource) => T,
    watch: (tracker: T, listedNow: () => void) => Array<Promise<void>>,
    what: string,
  ): SharedKind<T> {
    const id = gvr(ref);
    const known = kinds.get(id);
    if (known !== undefined) return known;
    const { config, reflectors, onFailed, listedOwn } = this.#options;
    const { http, signal, logger, onRefused } = reflectors;
    const namers = config.resources.filter((r) => named(r).some((n) => gvr(n) === id));
    let listedNow: () => void = () => undefined;
    const listed = new Promise<void>((resolve) => (listedNow = resolve));
    const tracker = resolveResource(http, ref, signal, logger, { ...(onRefused ? { onRefused } : {}), onFailed: onFailed(id) }).then(trackerOf);
    const kind = { tracker, listed };
    kinds.set(id, kind);
    void (async () => {
      const t = await tracker;
      await Promise.all(namers.map(listedOwn));
      if (signal.aborted) return;
      await Promise.all(watch(t, listedNow));
    })().catch((e: unknown) => {
      if (!signal.aborted) logger.error({ resource: id, err: (e as Error).message }, `watching ${what} failed`);
    });
    return kind;
  }
}
