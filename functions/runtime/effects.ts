// The effect step: the operator's declared external I/O (a queue, a bucket, a DNS record), under
// the function's own cloud identity. It runs after the spec is validated and the references are
// read, and before reconcile, so that reconcile — still pure — can wire what it made into the
// children (a queue's URL into a ConfigMap). What it returns in `status` is written at once,
// before any child: a later step that fails leaves the record of what exists outside the cluster
// on the object, for finalize and for the person looking. Retries are safe by contract, not by
// luck: the step gets a key that is the same on every redelivery of one generation, and a
// message redelivered after the work and before the record runs it again (it must find, not
// duplicate, what it made).
import { createHash } from "node:crypto";
import { z } from "zod";
import { zodLine } from "../../core/config-error.ts";
import { PermanentError, TemporaryError } from "../../core/errors.ts";
import type { CustomObject, EffectsResult, ObjectStatus, ReferencedObjects } from "../../core/operator.ts";
import { REFERENCES_FIELD, type ReferenceRecord } from "../../core/references.ts";
import type { KubeObject } from "./kube-api.ts";
import { sameJson } from "../../core/canonical-json.ts";
import type { Step } from "./step.ts";
import { UserCodeThrew } from "./thrown.ts";

export const EFFECTS_ERROR = "EffectsError";

/** effects threw something other than TemporaryError or PermanentError: EffectsError, retried with backoff. */
export class EffectsThrew extends UserCodeThrew {
  constructor(thrown: unknown) {
    super(thrown, "EffectsThrew");
  }
}

/** Stable per object (uid) and generation; 32 hex characters, which every client-token field takes. */
export function idempotencyKeyOf(uid: string, generation: number): string {
  return createHash("sha256").update(`${uid}/${generation}`).digest("hex").slice(0, 32);
}

const resultSchema = z
  .strictObject({
    status: z.record(z.string(), z.unknown()).optional(),
    requeueAfterSeconds: z.number().positive().optional(),
  })
  .optional();

/** Runs the operator's effects; undefined when it declares none. */
export async function runEffects(step: Step, object: CustomObject<unknown>, ctx: { now: Date; references: ReferencedObjects; env: Readonly<Record<string, string | undefined>> }): Promise<EffectsResult | undefined> {
  const { operator } = step;
  if (!operator.effects) return undefined;
  let result: unknown;
  try {
    result = await operator.effects(object, { ...ctx, idempotencyKey: idempotencyKeyOf(object.metadata.uid, object.metadata.generation) });
  } catch (thrown) {
    if (thrown instanceof PermanentError || thrown instanceof TemporaryError) throw thrown;
    throw new EffectsThrew(thrown);
  }
  const checked = resultSchema.safeParse(result ?? undefined);
  if (!checked.success) throw new PermanentError(`effects returned ${zodLine(checked.error)}`, "InvalidEffectsResult");
  const status = checked.data?.status;
  // Only a field-by-field schema can check a part of the status; the whole is checked after reconcile.
  const schema = step.operator.status;
  if (status !== undefined && schema instanceof z.ZodObject) {
    const parsed = schema.partial().safeParse(status);
    if (!parsed.success) throw new PermanentError(`effects' status does not match the operator's status schema: ${zodLine(parsed.error)}`, "InvalidStatus");
  }
  return { ...(status === undefined ? {} : { status }), ...(checked.data?.requeueAfterSeconds === undefined ? {} : { requeueAfterSeconds: checked.data.requeueAfterSeconds }) };
}

/**
 * Writes what effects returned (and what was referenced) into the status now, conditional on the
 * version read; returns the object as written (or as it was, when nothing changed).
 */
export async function recordEffects(step: Step, object: KubeObject, status: Record<string, unknown> | undefined, references: ReferenceRecord[] | undefined): Promise<KubeObject> {
  const previous = (object.status ?? {}) as ObjectStatus;
  const next: ObjectStatus = { ...previous, ...status };
  if (references !== undefined) {
    if (references.length > 0) next[REFERENCES_FIELD] = references;
    else delete next[REFERENCES_FIELD];
  }
  if (sameJson(next, previous)) return object;
  return step.api.replaceStatus(step.ref, { ...object, status: next }, step.operator.fieldManager);
}
