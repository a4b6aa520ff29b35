// What the bridge remembers of each object it watches, by key ("namespace/name", "/name" when
// cluster-scoped): uid, resourceVersion, a fingerprint, never a body. The base of the three
// trackers (parent-tracker.ts: the watched resources; child-tracker.ts: their owned kinds;
// reference-tracker.ts: the kinds they read); a relist's sweep turns what it no longer lists into
// a disappearance each tracker announces its own way.
import type { WatchedObject } from "./watched-object.ts";
import type { Announce, ObjectSink, ResolvedResource, Via } from "./sink.ts";
import type { Timers } from "./due-schedule.ts";

/** What every tracker remembers of an object. */
export interface Entry {
  uid: string;
  rv: string;
  fp: string;
  /** The list that last saw it, for sweeping. */
  epoch: number;
}

export interface TrackerOptions {
  cluster: string;
  /** Skip changes touching only status, managedFields or resourceVersion. */
  skipStatusOnly: boolean;
  announce: Announce;
  now: () => Date;
  /** Sets the schedule's timer (due-schedule.ts). */
  timers: Timers;
  /**
   * Field manager the functions apply children with. A child change that is that apply is the
   * function's own write in answer to its parent's event: announcing it would only reconcile
   * the parent again for nothing. Unset: every change announces.
   */
  functionFieldManager?: string;
  /** Called each time a due timer waits its turn (timer-turns.ts). */
  onTimerHeld?: () => void;
  /**
   * Tracing only: the traceparent of the change last sent for an object (by the publisher's key),
   * which a schedule its status records next is taken to answer (Publisher.lastTrace).
   */
  traceOf?: (publishKey: string) => string | undefined;
}

/** Whether a key lies in a namespace scope (undefined: every namespace). */
export const inScope = (key: string, namespace: string | undefined): boolean => namespace === undefined || key.startsWith(`${namespace}/`);

/** The objects of one kind, as a reflector feeds them (an ObjectSink); subclasses decide what to announce. */
export abstract class Tracker<E extends Entry> implements ObjectSink {
  readonly resource: ResolvedResource;
  protected readonly entries = new Map<string, E>();
  protected readonly options: TrackerOptions;
  #epoch = 0;

  constructor(resource: ResolvedResource, options: TrackerOptions) {
    this.resource = resource;
    this.options = options;
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
    return this.options.skipStatusOnly ? prev.fp !== next.fp : prev.rv !== next.rv;
  }

  abstract upsert(obj: WatchedObject, via: Via, epoch?: number): Promise<void>;
  abstract remove(obj: WatchedObject): Promise<void>;
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
