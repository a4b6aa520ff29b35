// Validating the spec, calling the user's pure reconcile, and checking what it returned.
import { z } from "zod";
import type { CustomObject, ObservedChildren, ReconcileResult, ReferencedObjects } from "../../core/operator.ts";
import { zodLine } from "../../core/config-error.ts";
import { PermanentError, TemporaryError } from "../../core/errors.ts";
import type { KubeObject } from "./kube-api.ts";
import type { Step } from "./step.ts";
import { UserCodeThrew } from "./thrown.ts";

/** reconcile threw something other than TemporaryError or PermanentError: a bug, shown as ReconcileError. */
export class ReconcileThrew extends UserCodeThrew {
  constructor(thrown: unknown) {
    super(thrown, "ReconcileThrew");
  }
}

const desiredSchema = z.looseObject({ apiVersion: z.string().min(1), kind: z.string().min(1), metadata: z.looseObject({ name: z.string().min(1) }) });
const resultSchema = z.object({
  children: z.array(desiredSchema).optional(),
  shared: z.array(desiredSchema).optional(),
  status: z.record(z.string(), z.unknown()).optional(),
  requeueAfterSeconds: z.number().positive().optional(),
});

/** The object with its spec parsed by the operator's schema (PermanentError InvalidSpec otherwise). */
export function validObject(step: Step, object: KubeObject): CustomObject<unknown> {
  const spec = step.operator.spec.safeParse(object.spec);
  if (!spec.success) throw new PermanentError(zodLine(spec.error), "InvalidSpec");
  return { ...(object as unknown as CustomObject<unknown>), spec: spec.data };
}

/**
 * `effected`: the status fields effects returned this time, under reconcile's own (which win);
 * the operator's status schema checks the two together.
 */
export function callReconcile(step: Step, object: CustomObject<unknown>, now: Date, children: ObservedChildren, references: ReferencedObjects, effected?: Record<string, unknown>): ReconcileResult {
  let result: unknown;
  try {
    result = step.operator.reconcile(object, { now, children, references });
  } catch (thrown) {
    if (thrown instanceof PermanentError || thrown instanceof TemporaryError) throw thrown;
    throw new ReconcileThrew(thrown);
  }
  if (result instanceof Promise || (typeof result === "object" && result !== null && typeof (result as { then?: unknown }).then === "function")) {
    // Whatever it does later must not surface as an unhandled rejection in the function.
    Promise.resolve(result).catch(() => {});
    throw new PermanentError("reconcile returned a Promise: reconcile must be synchronous and pure (do I/O in finalize, or in a child the cluster runs)", "AsyncReconcile");
  }
  const checked = resultSchema.safeParse(result);
  if (!checked.success) throw new PermanentError(zodLine(checked.error), "InvalidReconcileResult");
  const reconciled = result as ReconcileResult;
  const merged = effected === undefined ? reconciled : { ...reconciled, status: { ...effected, ...reconciled.status } };
  return withValidStatus(step, merged);
}

/** The operator's status schema checks the user's fields; conditions and observedGeneration are the runtime's. */
function withValidStatus(step: Step, result: ReconcileResult): ReconcileResult {
  const schema = step.operator.status;
  if (!schema || result.status === undefined) return result;
  const { conditions, ...fields } = result.status;
  const parsed = schema.safeParse(fields);
  if (!parsed.success) throw new PermanentError(`status does not match the operator's status schema: ${zodLine(parsed.error)}`, "InvalidStatus");
  return { ...result, status: { ...parsed.data, ...(conditions ? { conditions } : {}) } };
}
