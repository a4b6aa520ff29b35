// What a failed reconcile leaves behind: Ready=False and an Event for permanent failures and for
// reconcile's own unexpected throws (ReconcileError, then retried), a delayed retry for
// temporary ones, a failed message for the rest (infrastructure: the queue redelivers).
import type { ObjectStatus } from "../../core/operator.ts";
import { recordEvent } from "./events.ts";
import { ApiError } from "../../clients/kube-http.ts";
import { type KubeObject } from "./kube-api.ts";
import { classify, type Outcome } from "./outcome.ts";
import { ReconcileThrew } from "./reconcile-call.ts";
import { retryLater } from "./requeue-chain.ts";
import { failureStatus, sameJson } from "./status.ts";
import type { Step } from "./step.ts";

export const RECONCILE_ERROR = "ReconcileError";

/** Turns an error into an outcome; rethrows 409 Conflicts so the caller re-reads and retries. */
export async function onFailure(step: Step, object: KubeObject, error: unknown): Promise<Outcome> {
  const verdict = classify(error);
  if (verdict.kind === "conflict") throw error;
  if (verdict.kind === "unavailable") return { result: "unavailable", detail: verdict.message };
  try {
    // A write answered 404: if the object itself is gone (or replaced), there is nothing left to do.
    if (error instanceof ApiError && error.code === 404 && (await step.api.get(step.ref))?.metadata.uid !== object.metadata.uid) {
      return { result: "success", detail: "object is gone" };
    }
    if (verdict.kind === "permanent") {
      await recordFailure(step, object, verdict.reason, verdict.message, false);
      return { result: "permanent", detail: verdict.reason };
    }
    if (verdict.kind === "later") return await retryLater(step, object, verdict.delaySeconds, verdict.message);
    if (error instanceof ReconcileThrew) await recordFailure(step, object, RECONCILE_ERROR, error.message, true);
  } catch (writeError) {
    const writeVerdict = classify(writeError);
    if (writeVerdict.kind === "conflict") throw writeError;
    if (writeVerdict.kind === "unavailable") return { result: "unavailable", detail: writeVerdict.message };
    return failMessage(step, `handling ${verdict.kind} failed: ${(writeError as Error).message}`);
  }
  return failMessage(step, verdict.message);
}

/** Any other failure: fail the message; its visibility timeout is the backoff, the DLQ the limit. */
export function failMessage(step: Step, detail: string): Outcome {
  step.log.warn({ error: detail }, "reconcile failed; the queue will redeliver");
  return { result: "retry", detail };
}

/**
 * Ready=False with the reason, and an Event. An unchanged failure writes nothing; when it will be
 * retried (`countRepeats`) its Event's series counts the attempt instead of a new Event.
 */
async function recordFailure(step: Step, object: KubeObject, reason: string, message: string, countRepeats: boolean): Promise<void> {
  const previous = object.status as ObjectStatus | undefined;
  const status = failureStatus(previous, reason, message, object.metadata.generation ?? 0, step.clock());
  const unchanged = sameJson(status, previous);
  if (unchanged && !countRepeats) return;
  if (!unchanged) await step.api.replaceStatus(step.ref, { ...object, status }, step.operator.fieldManager);
  await recordEvent(step, object, { type: "Warning", reason, note: message, action: "Reconcile" }, unchanged);
}
