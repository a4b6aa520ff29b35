// Announcing known objects again for no change of their own: on request (`crdfn dev --watch`
// after a reload, RunningBridge.resync), and every resyncSeconds when a resource asks for it. A
// resync announcement never replaces a change still waiting to be sent, which says as much.
import { setTimeout as sleep } from "node:timers/promises";
import type { ParentTracker } from "./parent-tracker.ts";

/** Which objects a requested resync announces: those of one resource, or one object of it. */
export interface ResyncFilter {
  group: string;
  plural: string;
  namespace?: string;
  name?: string;
}

/** Announces the known objects `filter` selects (all without one) now; resolves with how many. */
export async function resyncNow(parents: readonly ParentTracker[], filter: ResyncFilter | undefined, now: () => Date): Promise<number> {
  let n = 0;
  const cause = `resync:${now().getTime()}`;
  for (const parent of parents) {
    if (filter && (parent.resource.group !== filter.group || parent.resource.plural !== filter.plural)) continue;
    for (const key of parent.keys()) {
      if (filter?.name !== undefined && key !== `${filter.namespace ?? ""}/${filter.name}`) continue;
      if (filter?.namespace !== undefined && !key.startsWith(`${filter.namespace}/`)) continue;
      await parent.reannounce(key, "resync", cause);
      n++;
    }
  }
  return n;
}

/**
 * Re-announces a resource's objects every `periodMs`, spread evenly over the period rather than in
 * one burst, until `signal` aborts. `parentOf`: the resource's tracker, once it has one.
 */
export async function resyncEvery(periodMs: number, parentOf: () => ParentTracker | undefined, now: () => Date, signal: AbortSignal): Promise<void> {
  if (periodMs === 0) return;
  const pause = (ms: number) => sleep(ms, undefined, { signal }).catch(() => undefined); // an abort ends the wait
  while (!signal.aborted) {
    const parent = parentOf();
    const keys = parent?.keys() ?? [];
    if (parent === undefined || keys.length === 0) {
      await pause(periodMs);
      continue;
    }
    const cause = `resync:${now().getTime()}`;
    // At least 100 ms between bursts: a timer per object would cost more than it spreads.
    const tickMs = Math.max(100, periodMs / keys.length);
    const perTick = Math.ceil((keys.length * tickMs) / periodMs);
    for (let i = 0; i < keys.length && !signal.aborted; i += perTick) {
      for (const key of keys.slice(i, i + perTick)) await parent.reannounce(key, "resync", cause, { keepExisting: true });
      await pause(tickMs);
    }
  }
}
