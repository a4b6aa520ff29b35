// The status the runtime writes: the user's fields, observedGeneration, the conditions with the
// runtime's Ready, and what the object wants next (core/schedule.ts), which the bridge turns into a
// re-announcement, and what it reconciled (core/reconciled.ts), which a new bridge compares with
// what it lists. An unchanged world computes an identical status, so the write is skipped; a
// write goes through /status, conditional on the resourceVersion read.
import { sameJson } from "../../core/canonical-json.ts";
import { setCondition, type Condition, type ConditionInput } from "../../core/conditions.ts";
import type { ObjectStatus, Operator, StatusInput } from "../../core/operator.ts";
import { NEXT_RECONCILE_FIELD, nextReconcileOf, type NextReason, type NextReconcile } from "../../core/schedule.ts";
import { REFERENCES_FIELD, type ReferenceRecord } from "../../core/references.ts";
import { RECONCILED_FIELD, type Reconciled } from "../../core/reconciled.ts";
import type { KubeObject } from "./kube-api.ts";
import type { EventContext } from "./event-context.ts";

export const READY = "Ready";

/**
 * `at` with millisecond precision: the bridge fires it to the millisecond. `traceparent` names the
 * trace that scheduled it (EventContext.traceparent), so the due change links to it.
 */
export function nextReconcile(
  reason: NextReason,
  at: Date,
  marks: { attempts?: number | undefined; traceparent?: string | undefined; timer?: boolean } = {},
): NextReconcile {
  return {
    at: at.toISOString(),
    reason,
    ...(marks.attempts === undefined ? {} : { attempts: marks.attempts }),
    ...(marks.traceparent === undefined ? {} : { traceparent: marks.traceparent }),
    ...(marks.timer ? { timer: true } : {}),
  };
}

/**
 * Writes the status after a successful reconcile, when it changed. `asked`: when reconcile and
 * effects asked to be called again; with the operator's timer, the soonest is when the object is
 * due next (status.nextReconcile, reason Requeue, which the bridge announces when due). Resolves
 * with that delay in seconds, if any.
 */
export async function writeSuccessStatus(
  ctx: EventContext,
  object: KubeObject,
  input: StatusInput | undefined,
  now: Date,
  asked: ReadonlyArray<number | undefined>,
  references?: ReferenceRecord[],
  reconciled?: Reconciled,
): Promise<number | undefined> {
  const previous = object.status as ObjectStatus | undefined;
  const requeueAfterSeconds = requeueAfter(ctx.operator, asked);
  const every = ctx.operator.every;
  const timer = every !== undefined && asked.every((s) => s === undefined || s > every);
  const next =
    requeueAfterSeconds === undefined
      ? undefined
      : nextReconcile("Requeue", new Date(now.getTime() + requeueAfterSeconds * 1000), { traceparent: ctx.traceparent, timer });
  const status = successStatus(previous, input, object.metadata.generation ?? 0, now, next, references, reconciled);
  if (!sameJson(status, previous)) await ctx.api.replaceStatus(ctx.ref, { ...object, status }, ctx.operator.fieldManager);
  return requeueAfterSeconds;
}

function requeueAfter(operator: Operator, asked: ReadonlyArray<number | undefined>): number | undefined {
  const all = [...asked, operator.every].filter((s): s is number => s !== undefined);
  return all.length === 0 ? undefined : Math.min(...all);
}

/**
 * Status after a successful reconcile: the user's fields, observedGeneration, their conditions
 * and Ready=True; `next` when reconcile asked to be called again (requeueAfterSeconds, a timer);
 * `references`, what it read (undefined: the operator references nothing); `reconciled`, the
 * metadata and children it left (undefined: the previous record stays).
 */
export function successStatus(
  previous: ObjectStatus | undefined,
  input: StatusInput | undefined,
  generation: number,
  now: Date,
  next?: NextReconcile,
  references?: ReferenceRecord[],
  reconciled?: Reconciled,
): ObjectStatus {
  const { conditions: reported = [], ...fields } = input ?? {};
  const ready: ConditionInput = { type: READY, status: "True", reason: "Reconciled", message: "", observedGeneration: generation };
  // Conditions the user no longer reports disappear; the ones still reported keep their transition times.
  const conditions = [...reported.filter((c) => c.type !== READY), ready]
    .reduce<Condition[]>((acc, c) => setCondition(acc, c, now), [])
    .map((c) => keepTransition(previous?.conditions, c));
  const record = reconciled ?? previous?.[RECONCILED_FIELD];
  const status = withNext({ ...fields, observedGeneration: generation, conditions, ...(record === undefined ? {} : { [RECONCILED_FIELD]: record }) }, next);
  return references === undefined ? status : withReferences(status, references);
}

/**
 * Status after a failure: the previous fields stay, Ready=False says why, and `next` says when it
 * is tried again (nothing for a permanent failure: it waits for the object to change).
 * `references`: what this attempt read, when it got that far (a reference that is missing is
 * often why it failed, and its creation must wake the object); undefined keeps the previous.
 */
export function failureStatus(
  previous: ObjectStatus | undefined,
  reason: string,
  message: string,
  generation: number,
  now: Date,
  next?: NextReconcile,
  references?: ReferenceRecord[],
): ObjectStatus {
  const conditions = setCondition(previous?.conditions, { type: READY, status: "False", reason, message, observedGeneration: generation }, now);
  const status = withNext({ ...previous, observedGeneration: generation, conditions }, next);
  return references === undefined ? status : withReferences(status, references);
}

/** The previous status with only its schedule replaced (a finalize that is not done yet). */
export function scheduledStatus(previous: ObjectStatus | undefined, next: NextReconcile | undefined): ObjectStatus {
  return withNext({ ...previous }, next);
}

/**
 * How many times this generation has failed before, from the schedule the status records: a
 * failure of a new generation starts again at 1.
 */
export function previousAttempts(previous: ObjectStatus | undefined, generation: number, reason: NextReason): number {
  const next = nextReconcileOf(previous);
  if (!next || next.reason !== reason || previous?.observedGeneration !== generation) return 0;
  return next.attempts ?? 0;
}

function withNext(status: ObjectStatus, next: NextReconcile | undefined): ObjectStatus {
  const { [NEXT_RECONCILE_FIELD]: _dropped, ...rest } = status;
  return next ? { ...rest, [NEXT_RECONCILE_FIELD]: next } : rest;
}

/** Only a non-empty list is written: an object that references nothing carries no field. */
function withReferences(status: ObjectStatus, references: ReferenceRecord[]): ObjectStatus {
  const { [REFERENCES_FIELD]: _dropped, ...rest } = status;
  return references.length > 0 ? { ...rest, [REFERENCES_FIELD]: references } : rest;
}

function keepTransition(previous: readonly Condition[] | undefined, c: Condition): Condition {
  const old = previous?.find((p) => p.type === c.type);
  return old && old.status === c.status ? { ...c, lastTransitionTime: old.lastTransitionTime } : c;
}
