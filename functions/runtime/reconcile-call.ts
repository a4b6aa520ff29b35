// Validating the spec, calling the user's pure reconcile, and checking what it returned.
import { z } from "zod";
import { PermanentError } from "../../core/errors.ts";
import type { CustomObject, ReconcileResult } from "../../core/operator.ts";
import type { KubeObject } from "./kube-api.ts";
import type { Step } from "./step.ts";

const desiredSchema = z.looseObject({ apiVersion: z.string().min(1), kind: z.string().min(1), metadata: z.looseObject({ name: z.string().min(1) }) });
const resultSchema = z.object({
  children: z.array(desiredSchema).optional(),
  shared: z.array(desiredSchema).optional(),
  status: z.record(z.string(), z.unknown()).optional(),
  requeueAfterSeconds: z.number().positive().optional(),
});

const oneLine = (error: z.ZodError): string => z.prettifyError(error).replace(/\n+/g, "; ");

/** The object with its spec parsed by the operator's schema (PermanentError InvalidSpec otherwise). */
export function validObject(step: Step, object: KubeObject): CustomObject<unknown> {
  const spec = step.operator.spec.safeParse(object.spec);
  if (!spec.success) throw new PermanentError(oneLine(spec.error), "InvalidSpec");
  return { ...(object as unknown as CustomObject<unknown>), spec: spec.data };
}

export function callReconcile(step: Step, object: CustomObject<unknown>, now: Date): ReconcileResult {
  const result = step.operator.reconcile(object, { now });
  const checked = resultSchema.safeParse(result);
  if (!checked.success) throw new PermanentError(oneLine(checked.error), "InvalidReconcileResult");
  return result;
}
