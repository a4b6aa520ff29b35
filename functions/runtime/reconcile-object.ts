// One reconcile of an object just read, step by step. Each step is its own function; this file
// only says in which order they run and what the outcome is:
//   finalizer → spec → children's and references' reads → effects (recorded at once) →
//   reconcile (pure) → children → status (with what is next: a requeue, the timer, and what it
//   reconciled: core/reconciled.ts) → prune (after the status write's precondition, so only from a
//   current view: children.ts).
import type { KubeObject } from "./kube-api.ts";
import { onFailure } from "./failure.ts";
import { ensureFinalizer, finalizeObject } from "./finalizer.ts";
import type { Outcome } from "./outcome.ts";
import { callReconcile, validObject } from "./reconcile-call.ts";
import { pruneChildren, writeChildren } from "./children.ts";
import { freshKeys, knownChildren, observedChildren, readObserved } from "./observed-children.ts";
import { recordEffects, runEffects } from "./effects.ts";
import { readReferences, referencedKeys, referencedObjects, referenceRecords } from "./references.ts";
import { writeSuccessStatus } from "./status-write.ts";
import type { Step } from "./step.ts";
import { requeueAfter } from "./timer.ts";
import type { ReferenceRecord } from "../../core/references.ts";
import { reconciledRecord } from "../../core/reconciled.ts";

/** Throws only 409 Conflicts (the caller re-reads); every other failure becomes an outcome. */
export async function reconcileObject(step: Step, read: KubeObject): Promise<Outcome> {
  let object = read;
  // What this attempt read, once known: recorded with its outcome, success or failure alike.
  let records: ReferenceRecord[] | undefined;
  try {
    if (object.metadata.deletionTimestamp) return await finalizeObject(step, object);
    object = await ensureFinalizer(step, object);
    const now = step.clock();
    const valid = validObject(step, object);
    const children = await knownChildren(step, object);
    const wanted = step.operator.reads.length > 0 ? referencedKeys(step, valid) : [];
    const [observed, referenced] = await Promise.all([readObserved(step, children), readReferences(step, wanted)]);
    if (step.operator.reads.length > 0) records = referenceRecords(referenced);
    const references = referencedObjects(step.operator, referenced, object.metadata.namespace);
    const effected = await runEffects(step, valid, { now, references, env: step.env });
    // Recorded before anything else is written: what exists outside the cluster is on the object.
    if (effected !== undefined) object = await recordEffects(step, object, effected.status, records);
    const result = callReconcile(step, effected ? validObject(step, object) : valid, now, observedChildren(step.operator, observed), references, effected?.status);
    const fresh = await freshKeys(step, object, children, result.children ?? []);
    const { wanted: asked, left } = await writeChildren(step, object, result, fresh, observed);
    const requeue = requeueAfter(step.operator, result.requeueAfterSeconds, effected?.requeueAfterSeconds);
    await writeSuccessStatus(step, object, result.status, now, requeue, records, reconciledRecord(object, left));
    await pruneChildren(step, object, fresh, asked);
    return { result: "success", detail: "reconciled", ...(requeue === undefined ? {} : { requeue: "after" as const }) };
  } catch (error) {
    return onFailure(step, object, error, records);
  }
}
