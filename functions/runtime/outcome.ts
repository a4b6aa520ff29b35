// The ONE place where what went wrong becomes what the queue should do about it.
import { PermanentError, TemporaryError } from "../../core/errors.ts";
import { ApiError } from "../../clients/kube-http.ts";
import { thrownMessage } from "./thrown.ts";

/**
 * - success: done, delete the message. `requeue`: the object will be handled again, "after" the
 *   delay reconcile asked for (requeueAfterSeconds), or "deferred" (not due yet, nothing done).
 * - retry-later: a durable delayed re-delivery was scheduled; delete this message.
 * - permanent: the failure is recorded on the object; nothing to retry until it changes.
 * - retry: fail the message; the queue redelivers it after its visibility timeout (counts
 *   towards the dead-letter limit, so a function that always crashes ends in the DLQ).
 * - dead-letter: the message itself is bad; fail it until the queue dead-letters it.
 */
export type Outcome =
  | { result: "success"; detail?: string; requeue?: "after" | "deferred" }
  | { result: "retry-later"; delaySeconds: number; detail: string }
  | { result: "permanent"; detail: string }
  | { result: "retry"; detail: string }
  | { result: "dead-letter"; detail: string };

/** Did the queue message get handled (delete it) or must it come back? */
export const messageHandled = (o: Outcome): boolean => o.result !== "retry" && o.result !== "dead-letter";

export type Verdict =
  | { kind: "conflict" }
  | { kind: "permanent"; reason: string; message: string }
  | { kind: "later"; delaySeconds: number; message: string }
  | { kind: "retry"; message: string };

export function classify(error: unknown): Verdict {
  if (error instanceof ApiError && error.code === 409) return { kind: "conflict" };
  // The API server refused what reconcile asked for (an invalid child): retrying the same
  // object cannot help, so it is recorded like a PermanentError.
  if (error instanceof ApiError && (error.code === 400 || error.code === 422)) return { kind: "permanent", reason: "RejectedByApiServer", message: error.message };
  if (error instanceof PermanentError) return { kind: "permanent", reason: error.reason, message: error.message };
  if (error instanceof TemporaryError) return { kind: "later", delaySeconds: error.delaySeconds, message: error.message };
  return { kind: "retry", message: thrownMessage(error) };
}
