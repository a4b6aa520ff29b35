// What a failed reconcile leaves behind: a Ready=False condition and an Event for permanent
// failures, a delayed retry for temporary ones, a failed message for the rest.
import type { ObjectStatus } from "../../core/operator.ts";
import type { KubeObject } from "./kube-api.ts";
import { classify, type Outcome } from "./outcome.ts";
import { retryLater } from "./requeue-chain.ts";
import { failureStatus, sameJson } from "./status.ts";
import type { Step } from "./step.ts";

/** Turns an error into an outcome; rethrows 409 Conflicts so the caller re-reads and retries. */
export async function onFailure(step: Step, object: KubeObject, error: unknown): Promise<Outcome> {
  const verdict = classify(error);
  if (verdict.kind === "conflict") throw error;
  try {
    if (verdict.kind === "permanent") {
      await recordFailure(step, object, verdict.reason, verdict.message);
      return { result: "permanent", detail: verdict.reason };
    }
    if (verdict.kind === "later") return await retryLater(step, object, verdict.delaySeconds, verdict.message);
  } catch (writeError) {
    if (classify(writeError).kind === "conflict") throw writeError;
    return failMessage(step, `handling ${verdict.kind} failed: ${(writeError as Error).message}`);
  }
  return failMessage(step, verdict.message);
}

/** Any other failure: fail the message; its visibility timeout is the backoff, the DLQ the limit. */
export function failMessage(step: Step, detail: string): Outcome {
  step.log.warn({ error: detail }, "reconcile failed; the queue will redeliver");
  return { result: "retry", detail };
}

async function recordFailure(step: Step, object: KubeObject, reason: string, message: string): Promise<void> {
  const now = step.clock();
  const previous = object.status as ObjectStatus | undefined;
  const status = failureStatus(previous, reason, message, object.metadata.generation ?? 0, now);
  // Unchanged failure → no write and no second Event: retrying waits for the object to change.
  if (sameJson(status, previous)) return;
  await step.api.replaceStatus(step.ref, { ...object, status });
  const namespace = object.metadata.namespace ?? "default";
  const time = now.toISOString().replace(/\.\d{3}Z$/, "Z");
  await step.api.create({ group: "", version: "v1", plural: "events", namespace }, {
    apiVersion: "v1",
    kind: "Event",
    metadata: { generateName: `${object.metadata.name}.`, namespace },
    involvedObject: { apiVersion: step.operator.apiVersion, kind: step.operator.resource.kind, name: object.metadata.name, namespace: object.metadata.namespace, uid: object.metadata.uid },
    type: "Warning",
    reason,
    message: message.slice(0, 1024),
    source: { component: step.operator.fieldManager },
    firstTimestamp: time,
    lastTimestamp: time,
    count: 1,
  });
}
