// The user's code, called and checked: effects (the declared external I/O, under the function's
// own cloud identity) and then reconcile (pure), and what either threw. Effects run after the
// spec is validated and the references are read, and before reconcile, so that reconcile — still
// pure — can wire what they made into the children (a queue's URL into a ConfigMap). What effects
// return in `status` is written at once, before any child: a later step that fails leaves the
// record of what exists outside the cluster on the object, for finalize and for the person
// looking. Retries are safe by contract, not by luck: effects get a key that is the same on every
// redelivery of one generation, and a message redelivered after the work and before the record
// runs them again (they must find, not duplicate, what they made).
import { createHash } from "node:crypto";
import { z } from "zod";
import { zodLine } from "../../core/config-error.ts";
import { PermanentError, TemporaryError } from "../../core/errors.ts";
import type { CustomObject, EffectsResult, ObjectStatus, ObservedChildren, ReconcileResult, ReferencedObjects } from "../../core/operator.ts";
import { REFERENCES_FIELD, type ReferenceRecord } from "../../core/references.ts";
import { sameJson } from "../../core/canonical-json.ts";
import type { KubeObject } from "./kube-api.ts";
import type { EventContext } from "./event-context.ts";
import { step, stepNow } from "./steps.ts";

/** The text of whatever was thrown: `[object Object]` and `undefined` are not messages. */
export function thrownMessage(value: unknown): string {
  if (value instanceof Error) return value.message || value.name;
  if (typeof value === "string") return value || "an empty string was thrown";
  if (value === undefined || value === null) return `${String(value)} was thrown`;
  if (typeof value === "number" || typeof value === "boolean" || typeof value === "bigint") return `thrown: ${value}`;
  if (typeof value === "symbol") return `thrown: ${value.toString()}`;
  try {
    return `thrown: ${JSON.stringify(value) ?? Object.prototype.toString.call(value)}`;
  } catch {
    return `thrown: ${Object.prototype.toString.call(value)}`;
  }
}

/**
 * What the user's code threw (reconcile, effects, finalize), carried as its text. Never an outage
 * of the cluster, whatever its words say ("timed out" from a cloud API is that API's, not the
 * API server's): it is retried with the object's own backoff and shown on the object.
 */
export class UserCodeThrew extends Error {
  constructor(thrown: unknown, name: string) {
    super(thrownMessage(thrown));
    this.name = name;
  }
}

/** reconcile (or a reference's name function) threw something other than TemporaryError or PermanentError: a bug, shown as ReconcileError. */
export class ReconcileThrew extends UserCodeThrew {
  constructor(thrown: unknown) {
    super(thrown, "ReconcileThrew");
  }
}

export const EFFECTS_ERROR = "EffectsError";

/** effects threw something other than TemporaryError or PermanentError: EffectsError, retried with backoff. */
export class EffectsThrew extends UserCodeThrew {
  constructor(thrown: unknown) {
    super(thrown, "EffectsThrew");
  }
}

/** finalize threw: shown as FinalizeError, retried with backoff, the finalizer kept. */
export class FinalizeThrew extends UserCodeThrew {
  constructor(thrown: unknown) {
    super(thrown, "FinalizeThrew");
  }
}

/** Stable per object (uid) and generation; 32 hex characters, which every client-token field takes. */
export function idempotencyKeyOf(uid: string, generation: number): string {
  return createHash("sha256").update(`${uid}/${generation}`).digest("hex").slice(0, 32);
}

/** What reconcile is given besides the object, and what this attempt read (for status.references). */
export interface ReconcileInputs {
  now: Date;
  children: ObservedChildren;
  references: ReferencedObjects;
  records: ReferenceRecord[] | undefined;
}

export interface Called {
  /** The object after effects' record (as read when there was nothing to record). */
  object: KubeObject;
  result: ReconcileResult;
  /** When effects asked to be called again. */
  effectsRequeueAfterSeconds?: number;
}

/** Effects (when declared), their record written at once, then reconcile on the object as recorded. */
export async function effectsThenReconcile(ctx: EventContext, read: KubeObject, valid: CustomObject<unknown>, inputs: ReconcileInputs): Promise<Called> {
  const effected = await runEffects(ctx, valid, inputs);
  if (effected === undefined) return { object: read, result: callReconcile(ctx, valid, inputs) };
  // Recorded before anything else is written: what exists outside the cluster is on the object.
  const object = await recordEffects(ctx, read, effected.status, inputs.records);
  const recorded = { ...(object as unknown as CustomObject<unknown>), spec: valid.spec };
  return {
    object,
    result: callReconcile(ctx, recorded, inputs, effected.status),
    ...(effected.requeueAfterSeconds === undefined ? {} : { effectsRequeueAfterSeconds: effected.requeueAfterSeconds }),
  };
}

const effectsResultSchema = z
  .strictObject({
    status: z.record(z.string(), z.unknown()).optional(),
    requeueAfterSeconds: z.number().positive().optional(),
  })
  .optional();

/** Runs the operator's effects; undefined when it declares none. */
async function runEffects(ctx: EventContext, object: CustomObject<unknown>, inputs: ReconcileInputs): Promise<EffectsResult | undefined> {
  const { operator } = ctx;
  if (!operator.effects) return undefined;
  let result: unknown;
  try {
    const effects = operator.effects.bind(operator);
    result = await step(ctx, "effects", async () =>
      effects(object, {
        now: inputs.now,
        references: inputs.references,
        env: ctx.env,
        idempotencyKey: idempotencyKeyOf(object.metadata.uid, object.metadata.generation),
      }),
    );
  } catch (thrown) {
    if (thrown instanceof PermanentError || thrown instanceof TemporaryError) throw thrown;
    throw new EffectsThrew(thrown);
  }
  const checked = effectsResultSchema.safeParse(result ?? undefined);
  if (!checked.success) throw new PermanentError(`effects returned ${zodLine(checked.error)}`, "InvalidEffectsResult");
  const status = checked.data?.status;
  // Only a field-by-field schema can check a part of the status; the whole is checked after reconcile.
  const schema = operator.status;
  if (status !== undefined && schema instanceof z.ZodObject) {
    const parsed = schema.partial().safeParse(status);
    if (!parsed.success) throw new PermanentError(`effects' status does not match the operator's status schema: ${zodLine(parsed.error)}`, "InvalidStatus");
  }
  return {
    ...(status === undefined ? {} : { status }),
    ...(checked.data?.requeueAfterSeconds === undefined ? {} : { requeueAfterSeconds: checked.data.requeueAfterSeconds }),
  };
}

/**
 * Writes what effects returned (and what was referenced) into the status now, conditional on the
 * version read; returns the object as written (or as it was, when nothing changed).
 */
async function recordEffects(
  ctx: EventContext,
  object: KubeObject,
  status: Record<string, unknown> | undefined,
  references: ReferenceRecord[] | undefined,
): Promise<KubeObject> {
  const previous = (object.status ?? {}) as ObjectStatus;
  const next: ObjectStatus = { ...previous, ...status };
  if (references !== undefined) {
    if (references.length > 0) next[REFERENCES_FIELD] = references;
    else delete next[REFERENCES_FIELD];
  }
  if (sameJson(next, previous)) return object;
  return step(ctx, "function write", () => ctx.api.replaceStatus(ctx.ref, { ...object, status: next }, ctx.operator.fieldManager));
}

const desiredSchema = z.looseObject({ apiVersion: z.string().min(1), kind: z.string().min(1), metadata: z.looseObject({ name: z.string().min(1) }) });
const reconcileResultSchema = z.object({
  children: z.array(desiredSchema).optional(),
  shared: z.array(desiredSchema).optional(),
  status: z.record(z.string(), z.unknown()).optional(),
  requeueAfterSeconds: z.number().positive().optional(),
});

/**
 * `effected`: the status fields effects returned this time, under reconcile's own (which win);
 * the operator's status schema checks the two together.
 */
function callReconcile(ctx: EventContext, object: CustomObject<unknown>, inputs: ReconcileInputs, effected?: Record<string, unknown>): ReconcileResult {
  let result: unknown;
  try {
    result = stepNow(ctx, "reconcile", () => ctx.operator.reconcile(object, { now: inputs.now, children: inputs.children, references: inputs.references }));
  } catch (thrown) {
    if (thrown instanceof PermanentError || thrown instanceof TemporaryError) throw thrown;
    throw new ReconcileThrew(thrown);
  }
  if (result instanceof Promise || (typeof result === "object" && result !== null && typeof (result as { then?: unknown }).then === "function")) {
    // Whatever it does later must not surface as an unhandled rejection in the function.
    Promise.resolve(result).catch(() => {});
    throw new PermanentError(
      "reconcile returned a Promise: reconcile must be synchronous and pure (do I/O in finalize, or in a child the cluster runs)",
      "AsyncReconcile",
    );
  }
  const checked = reconcileResultSchema.safeParse(result);
  if (!checked.success) throw new PermanentError(zodLine(checked.error), "InvalidReconcileResult");
  const reconciled = result as ReconcileResult;
  const merged = effected === undefined ? reconciled : { ...reconciled, status: { ...effected, ...reconciled.status } };
  return withValidStatus(ctx, merged);
}

/** The operator's status schema checks the user's fields; conditions and observedGeneration are the runtime's. */
function withValidStatus(ctx: EventContext, result: ReconcileResult): ReconcileResult {
  const schema = ctx.operator.status;
  if (!schema || result.status === undefined) return result;
  const { conditions, ...fields } = result.status;
  const parsed = schema.safeParse(fields);
  if (!parsed.success) throw new PermanentError(`status does not match the operator's status schema: ${zodLine(parsed.error)}`, "InvalidStatus");
  return { ...result, status: { ...parsed.data, ...(conditions ? { conditions } : {}) } };
}
