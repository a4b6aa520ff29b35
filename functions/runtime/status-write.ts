// Writing status after a successful reconcile: only when it changed, through /status, conditional
// on the resourceVersion read. What the object wants next (requeueAfterSeconds, its timer), what it
// read (its references) and what it reconciled (core/reconciled.ts) ride in it.
import type { ObjectStatus, StatusInput } from "../../core/operator.ts";
import type { ReferenceRecord } from "../../core/references.ts";
import type { Reconciled } from "../../core/reconciled.ts";
import type { KubeObject } from "./kube-api.ts";
import { sameJson } from "../../core/canonical-json.ts";
import { nextReconcile, successStatus } from "./status.ts";
import type { Step } from "./step.ts";

export async function writeSuccessStatus(step: Step, object: KubeObject, input: StatusInput | undefined, now: Date, requeueAfterSeconds?: number, references?: ReferenceRecord[], reconciled?: Reconciled): Promise<void> {
  const previous = object.status as ObjectStatus | undefined;
  const next = requeueAfterSeconds === undefined ? undefined : nextReconcile("Requeue", new Date(now.getTime() + requeueAfterSeconds * 1000));
  const status = successStatus(previous, input, object.metadata.generation ?? 0, now, next, references, reconciled);
  if (!sameJson(status, previous)) await step.api.replaceStatus(step.ref, { ...object, status }, step.operator.fieldManager);
}
