// Writing status: only when it changed, through /status, conditional on the resourceVersion read.
import type { ObjectStatus, StatusInput } from "../../core/operator.ts";
import type { KubeObject } from "./kube-api.ts";
import { sameJson, successStatus } from "./status.ts";
import type { Step } from "./step.ts";

/** Has this generation not been reconciled successfully yet? */
export function advancing(object: KubeObject): boolean {
  return (object.status as ObjectStatus | undefined)?.observedGeneration !== (object.metadata.generation ?? 0);
}

export async function writeSuccessStatus(step: Step, object: KubeObject, input: StatusInput | undefined, now: Date): Promise<void> {
  const previous = object.status as ObjectStatus | undefined;
  const status = successStatus(previous, input, object.metadata.generation ?? 0, now);
  if (!sameJson(status, previous)) await step.api.replaceStatus(step.ref, { ...object, status });
}
