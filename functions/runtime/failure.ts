// What a failed reconcile leaves behind. Every failure of the object's own is recorded ON the
// object — Ready=False with the reason, an Event, and for what is retried the next attempt's time
// (status.nextReconcile), which the bridge announces into the object's own FIFO group — and the
// message is done. The queue's own retries (and its dead-letter queue) are left for what the
// object cannot record: its status write refused, or the runtime unable to finish at all.
import { backoffMs } from "../../core/backoff.ts";
import type { ObjectStatus } from "../../core/operator.ts";
import { RETRY_BACKOFF, type NextReason } from "../../core/schedule.ts";
import type { ReferenceRecord } from "../../core/references.ts";
import { recordEvent } from "./events.ts";
import { ApiError } from "../../clients/kube-http.ts";
import { type KubeObject } from "./kube-api.ts";
import { classify, type Outcome, type Verdict } from "./outcome.ts";
import { sameJson } from "../../core/canonical-json.ts";
import { failureStatus, nextReconcile, previousAttempts } from "./status.ts";
import type { EventContext } from "./event-context.ts";
import { EFFECTS_ERROR, EffectsThrew, FinalizeThrew } from "./user-code.ts";
import { step } from "./steps.ts";

export const RECONCILE_ERROR = "ReconcileError";
export const FINALIZE_ERROR = "FinalizeError";

/**
 * Turns an error into an outcome; rethrows 409 Conflicts so the caller re-reads and retries.
 * `references`: what the attempt read before it failed, recorded with the failure.
 */
export async function onFailure(ctx: EventContext, object: KubeObject, error: unknown, references?: ReferenceRecord[]): Promise<Outcome> {
  const verdict = classify(error);
  if (verdict.kind === "conflict") throw error;
  if (verdict.kind === "unavailable") return { result: "unavailable", detail: verdict.message };
  try {
    // A write answered 404: if the object itself is gone (or replaced), there is nothing left to do.
    if (error instanceof ApiError && error.code === 404 && (await ctx.api.get(ctx.ref))?.metadata.uid !== object.metadata.uid) {
      return { result: "success", detail: "object is gone" };
    }
    if (verdict.kind === "permanent") {
      await step(ctx, "function write", () => recordFailure(ctx, object, verdict.reason, verdict.message, false, undefined, references), FAILURE_WRITE);
      return { result: "permanent", detail: verdict.reason };
    }
    const retry = retryOf(object, error, verdict);
    await step(ctx, "function write", () => recordFailure(ctx, object, retry.reason, verdict.message, true, retry, references), FAILURE_WRITE);
    return { result: "retry-later", delaySeconds: retry.delaySeconds, detail: `${retry.reason}: ${verdict.message}` };
  } catch (writeError) {
    const writeVerdict = classify(writeError);
    if (writeVerdict.kind === "conflict") throw writeError;
    if (writeVerdict.kind === "unavailable") return { result: "unavailable", detail: writeVerdict.message };
    return await unrecordable(ctx, object, verdict, writeError);
  }
}

/** A "function write" span of a failure's record (steps.ts), beside a success's. */
const FAILURE_WRITE = { "crdfn.write": "failure" };

interface Retry {
  reason: string;
  next: NextReason;
  /** This generation's failed attempts, this one included. */
  attempts: number;
  delaySeconds: number;
}

/** Why, and after how long, a failure that is retried is tried again: TemporaryError's own delay, else the per-object backoff. */
function retryOf(object: KubeObject, error: unknown, verdict: Extract<Verdict, { kind: "later" | "retry" }>): Retry {
  const next: NextReason = error instanceof FinalizeThrew ? "Finalize" : "Retry";
  const attempts = previousAttempts(object.status as ObjectStatus | undefined, object.metadata.generation ?? 0, next) + 1;
  if (verdict.kind === "later") return { reason: verdict.reason, next, attempts, delaySeconds: verdict.delaySeconds };
  const reason =
    error instanceof FinalizeThrew
      ? FINALIZE_ERROR
      : error instanceof EffectsThrew
        ? EFFECTS_ERROR
        : error instanceof ApiError
          ? apiReason(error)
          : RECONCILE_ERROR;
  return { reason, next, attempts, delaySeconds: backoffMs(attempts, RETRY_BACKOFF) / 1000 };
}

/** The API server's Status reason (Forbidden, InternalError…) when it gave one. */
const apiReason = (e: ApiError): string => (/^[A-Z][A-Za-z]+$/.test(e.reason) && e.reason !== "Unknown" ? e.reason : "ApiError");

/**
 * Ready=False with the reason, an Event, and (when retried) the next attempt. An unchanged
 * permanent failure writes nothing; a repeated retried one counts on its Event's series.
 */
async function recordFailure(
  ctx: EventContext,
  object: KubeObject,
  reason: string,
  message: string,
  countRepeats: boolean,
  retry?: Retry,
  references?: ReferenceRecord[],
): Promise<void> {
  const previous = object.status as ObjectStatus | undefined;
  const now = ctx.clock();
  const next =
    retry && nextReconcile(retry.next, new Date(now.getTime() + retry.delaySeconds * 1000), { attempts: retry.attempts, traceparent: ctx.traceparent });
  const status = failureStatus(previous, reason, message, object.metadata.generation ?? 0, now, next, references);
  const unchanged = sameJson(status, previous);
  if (unchanged && !countRepeats) return;
  if (!unchanged) await ctx.api.replaceStatus(ctx.ref, { ...object, status }, ctx.operator.fieldManager);
  // The same failure again counts on one Event (its series) instead of adding another.
  await recordEvent(ctx, object, { type: "Warning", reason, note: message, action: "Reconcile" }, unchanged || (retry?.attempts ?? 1) > 1);
}

/**
 * The object refused its own status (an admission policy, RBAC, a webhook): nothing can be
 * recorded on it, so the message itself is retried and, if that keeps failing, dead-lettered.
 * Said once per receive in the log and, where the API server allows it, as an Event.
 */
async function unrecordable(ctx: EventContext, object: KubeObject, verdict: Verdict, writeError: unknown): Promise<Outcome> {
  const refusal = writeError instanceof ApiError ? `${writeError.code} ${writeError.message}` : (writeError as Error).message;
  const failed = "message" in verdict ? verdict.message : verdict.kind;
  const detail = `the status write was refused (${refusal}); the failure it would record: ${failed}`;
  ctx.log.error(
    { error: refusal, failure: failed },
    "cannot record the outcome on the object: its status write was refused; the message is retried and then dead-lettered",
  );
  try {
    await recordEvent(ctx, object, { type: "Warning", reason: "StatusWriteRefused", note: detail, action: "Reconcile" }, true);
  } catch {
    // Refused too (an unserved namespace refuses Events as well): the log line above is the record.
  }
  return failMessage(ctx, detail);
}

/** Fail the message; its visibility timeout is the backoff, the DLQ the limit. */
export function failMessage(ctx: EventContext, detail: string): Outcome {
  ctx.log.warn({ error: detail }, "reconcile failed; the queue will redeliver");
  return { result: "retry", detail };
}
