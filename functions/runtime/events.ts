// Kubernetes Events about the parent, through events.k8s.io/v1 and aggregated like client-go's
// recorder: the same occurrence again bumps `series` on ONE Event instead of adding another.
// The Event's name is derived from what it says, so a stateless function finds it again.
import { createHash } from "node:crypto";
import { ApiError } from "../../clients/kube-http.ts";
import { microTime } from "../../clients/micro-time.ts";
import { isInfrastructureFailure } from "./outcome.ts";
import { type KubeObject, type ResourceRef } from "./kube-api.ts";
import type { EventContext } from "./event-context.ts";

export interface EventNote {
  type: "Normal" | "Warning";
  reason: string;
  note: string;
  /** What the runtime was doing (events.k8s.io requires it). */
  action: string;
}

/**
 * `repeat`: the caller knows this occurrence was recorded before (its status did not change).
 * An Event the API server refuses (RBAC, a namespace not served: a cluster-scoped object's
 * Events go to `default`) is logged and skipped: the condition on the object is the record, and
 * an Event must not turn a recorded failure into an unrecorded one. Outages still throw.
 */
export async function recordEvent(ctx: EventContext, object: KubeObject, e: EventNote, repeat: boolean): Promise<void> {
  try {
    await writeEvent(ctx, object, e, repeat);
  } catch (error) {
    if (isInfrastructureFailure(error) || (error instanceof ApiError && error.code === 409)) throw error;
    ctx.log.warn({ reason: e.reason, error: (error as Error).message }, "could not record the Event");
  }
}

async function writeEvent(ctx: EventContext, object: KubeObject, e: EventNote, repeat: boolean): Promise<void> {
  const namespace = object.metadata.namespace ?? "default";
  const id = createHash("sha256")
    .update(`${object.metadata.uid ?? ""}|${e.type}|${e.reason}|${e.note}`)
    .digest("hex")
    .slice(0, 16);
  const name = `${object.metadata.name.slice(0, 200)}.${id}`;
  const ref: ResourceRef = { group: "events.k8s.io", version: "v1", plural: "events", namespace, name };
  const now = microTime(ctx.clock());
  if (repeat && (await bumpSeries(ctx, ref, now))) return;
  const { name: _name, ...collection } = ref;
  try {
    await ctx.api.create(collection, {
      apiVersion: "events.k8s.io/v1",
      kind: "Event",
      metadata: { name, namespace },
      eventTime: now,
      reportingController: ctx.operator.fieldManager,
      reportingInstance: `${ctx.operator.fieldManager}-functions`,
      action: e.action,
      type: e.type,
      reason: e.reason,
      note: e.note.slice(0, 1024),
      regarding: {
        apiVersion: ctx.operator.apiVersion,
        kind: ctx.operator.resource.kind,
        name: object.metadata.name,
        namespace: object.metadata.namespace,
        uid: object.metadata.uid,
      },
    });
  } catch (error) {
    if (!(error instanceof ApiError && error.code === 409)) throw error;
    await bumpSeries(ctx, ref, now);
  }
}

/** false when the Event is gone (Events expire after an hour by default). */
async function bumpSeries(ctx: EventContext, ref: ResourceRef, now: string): Promise<boolean> {
  const existing = await ctx.api.get(ref);
  if (!existing) return false;
  const count = ((existing.series as { count?: number } | undefined)?.count ?? 1) + 1;
  await ctx.api.mergePatch(ref, { series: { count, lastObservedTime: now } });
  return true;
}
