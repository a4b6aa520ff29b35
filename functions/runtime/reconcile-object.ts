// One reconcile of an object just read, step by step. Each step is its own function; this file
// only says in which order they run and what the outcome is.
import type { KubeObject } from "./kube-api.ts";
import { onFailure } from "./failure.ts";
import { ensureFinalizer, finalizeObject } from "./finalizer.ts";
import type { Outcome } from "./outcome.ts";
import { callReconcile, validObject } from "./reconcile-call.ts";
import { writeChildren } from "./children.ts";
import { childKeysOf, observedChildren, readObserved } from "./observed-children.ts";
import { writeSuccessStatus } from "./status-write.ts";
import type { Step } from "./step.ts";

/** Throws only 409 Conflicts (the caller re-reads); every other failure becomes an outcome. */
export async function reconcileObject(step: Step, read: KubeObject): Promise<Outcome> {
  let object = read;
  try {
    if (object.metadata.deletionTimestamp) return await finalizeObject(step, object);
    object = await ensureFinalizer(step, object);
    const now = step.clock();
    const keys = childKeysOf(step);
    const observed = await readObserved(step, keys);
    const result = callReconcile(step, validObject(step, object), now, observedChildren(step.operator, observed));
    await writeChildren(step, object, result, keys, observed);
    await writeSuccessStatus(step, object, result.status, now, result.requeueAfterSeconds);
    return { result: "success", detail: "reconciled", ...(result.requeueAfterSeconds === undefined ? {} : { requeue: "after" as const }) };
  } catch (error) {
    return onFailure(step, object, error);
  }
}
