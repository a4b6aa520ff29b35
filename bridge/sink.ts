// The seams of the always-on path, watcher → index → publisher: what a reflector feeds (an
// ObjectSink, which the trackers are) and what a tracker hands the publisher (an announcement).
// Types only, so the reflector and the publisher know the trackers by these alone.
import type { KeyEvent } from "../core/event.ts";
import type { GroupVersionResource } from "../core/resource-path.ts";
import type { WatchedObject } from "./watched-object.ts";

/** A watched kind as API discovery names it (discovery.ts). */
export interface ResolvedResource extends GroupVersionResource {
  kind: string;
  namespaced: boolean;
}

/** How a change reached the bridge; becomes the event's `reason`. */
export type Via = "list" | "relist" | "watch";

/** What a reflector feeds: the objects of one resource in one namespace scope. */
export interface ObjectSink {
  readonly resource: ResolvedResource;
  /** A new list starts; objects it does not mention by `sweep` are gone. */
  beginList(): number;
  upsert(obj: WatchedObject, via: Via, epoch?: number): Promise<void>;
  remove(obj: WatchedObject): Promise<void>;
  /** After a complete list: everything in `namespace` (all if undefined) not seen in it vanished. */
  sweep(namespace: string | undefined, epoch: number): Promise<void>;
  readonly size: number;
}

export interface AnnounceOptions {
  /** A waiting announcement says at least as much: keep it (resync). */
  keepExisting?: boolean;
  /** Only bring a waiting announcement up to date (a newer body); announce nothing new. */
  onlyIfPending?: boolean;
  /** Wait this long before sending, for what usually follows (the function's status write). */
  holdMs?: number;
  /**
   * The function's status records the object's children as the index now knows them: a waiting
   * announcement that stands only for held child changes (holdMs) is answered, and dropped. One
   * that says more stays, brought up to date only with `onlyIfPending`.
   */
  withdrawHeld?: boolean;
  /** What the object's status had due and fell due: its change links to the trace that scheduled it. */
  scheduled?: ScheduledBy;
}

/** A reconcile an object's status asked for (core/schedule.ts), as its announcement's trace names it. */
export interface ScheduledBy {
  /** A failure's backoff (and a finalize not done yet), requeueAfterSeconds, or the operator's timer (`every`). */
  kind: "retry" | "requeue" | "timer";
  /** The W3C traceparent of the change whose reconcile recorded it, when the bridge knows it. */
  traceparent?: string;
}

/** Hands an event to the publisher; `cause` keeps distinct announcements of one version apart. */
export type Announce = (key: string, event: KeyEvent, cause: string, options?: AnnounceOptions) => Promise<void>;
