// Writing status: only when it changed, through /status, conditional on the resourceVersion read.
import type { ObjectStatus, StatusInput } from "../../core/operator.ts";
import type { KubeObject } from "./kube-api.ts";
import { findCondition } from "../../core/conditions.ts";
import { READY, sameJson, successStatus } from "./status.ts";
import type { Step } from "./step.ts";

/**
 * Has this generation not been reconciled successfully yet (first time, or after a failure)?
 * Exactly one status write can make it so, thanks to the resourceVersion precondition.
 */
export function advancing(object: KubeObject): boolean {
  const ready = findCondition((object.status as ObjectStatus | undefined)?.conditions, READY);
  return ready?.status !== "True" || ready.observedGeneration !== (object.metadata.generation ?? 0);
}

export async function writeSuccessStatus(step: Step, object: KubeObject, input: StatusInput | undefined, now: Date): Promise<void> {
  const previous = object.status as ObjectStatus | undefined;
  const status = successStatus(previous, input, object.metadata.generation ?? 0, now);
  if (!sameJson(status, previous)) await step.api.replaceStatus(step.ref, { ...object, status }, step.operator.fieldManager);
}
