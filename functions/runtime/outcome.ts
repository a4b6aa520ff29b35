// The ONE place where what went wrong becomes what the queue should do about it.
import { PermanentError, TemporaryError } from "../../core/errors.ts";
import { ApiError, isServerOutage } from "../../clients/kube-http.ts";
import { isStaleRefusal } from "../../core/fence.ts";
import { thrownMessage, UserCodeThrew } from "./user-code.ts";

/**
 * - success: done, delete the message. `requeue: "after"`: the object recorded when to be
 *   reconciled again (requeueAfterSeconds), and the bridge will announce it then.
 * - retry-later: the failure is recorded on the object (Ready=False, an Event) with the time of
 *   the next attempt, which the bridge announces into the object's own FIFO group; delete this message.
 * - permanent: the failure is recorded on the object; nothing to retry until it changes.
 * - retry: the object could not record its failure (its status write was refused), or the
 *   runtime could not finish: fail the message; the queue redelivers it with backoff and
 *   dead-letters it when it keeps failing.
 * - dead-letter: the message itself is bad; fail it until the queue dead-letters it.
 * - unavailable: the API server (or its credential) failed, not the object. Not the message's
 *   fault, so it must not spend its receive budget: the adapters defer it and back off across the
 *   whole cluster (its circuit), both in functions/adapters/settle.ts.
 */
export type Outcome =
  /** `earlierIncarnation`: the event names an object of this name that is gone (deleted and re-created since): nothing was done. */
  | { result: "success"; detail?: string; requeue?: "after"; earlierIncarnation?: true }
  | { result: "retry-later"; delaySeconds: number; detail: string }
  | { result: "permanent"; detail: string }
  | { result: "retry"; detail: string }
  | { result: "dead-letter"; detail: string }
  | { result: "unavailable"; detail: string };

/** Did the queue message get handled (delete it) or must it come back? */
export const messageHandled = (o: Outcome): boolean => o.result !== "retry" && o.result !== "dead-letter" && o.result !== "unavailable";

export type Verdict =
  | { kind: "conflict" }
  | { kind: "permanent"; reason: string; message: string }
  | { kind: "later"; delaySeconds: number; reason: string; message: string }
  | { kind: "retry"; message: string }
  | { kind: "unavailable"; message: string };

/**
 * The view a reconcile acted on is no longer the object's: an API server's refusal showed it, and
 * a read of the parent proved it (another uid, a newer generation). Like a 409: read and recompute.
 */
export class StaleView extends Error {
  constructor(message: string) {
    super(message);
    this.name = "StaleView";
  }
}

/** An admission policy or webhook refused this write (403): about the object, not the credential. */
const deniedByAdmission = (e: ApiError): boolean => e.code === 403 && /ValidatingAdmissionPolicy|admission webhook/.test(e.message);

/**
 * Failures of the API server itself, which every object of the cluster would meet alike, decided
 * by type (clients/kube-errors.ts), never by an error's words: no answer (a transport failure or
 * the client's own timeout), a 401/403 while it is not ready (restarting: its RBAC warming up),
 * load shed (429), cannot serve (503), its own timeout (504), and a refused function credential
 * (401 from a ready server: every object alike). Everything else is about one object or one kind
 * and is shown on the object: a webhook's 500, an RBAC 403 for one kind from a ready server, a
 * 422, a 404. Narrow on purpose: a circuit opened for one kind's failure would stop every kind.
 * What the user's code threw never counts, whatever it carries.
 */
export function isInfrastructureFailure(error: unknown): boolean {
  if (error instanceof UserCodeThrew) return false;
  if (isServerOutage(error)) return true;
  return error instanceof ApiError && error.code === 401;
}

export function classify(error: unknown): Verdict {
  if ((error instanceof ApiError && error.code === 409) || error instanceof StaleView) return { kind: "conflict" };
  // Our own policy's fence refused a child from an older generation of the parent: the view was
  // stale, like a 409, so re-read and recompute; never the object's failure.
  if (error instanceof ApiError && isStaleRefusal(error)) return { kind: "conflict" };
  // The API server refused what reconcile asked for (an invalid child): retrying the same
  // object cannot help, so it is recorded like a PermanentError.
  if (error instanceof ApiError && (error.code === 400 || error.code === 422 || deniedByAdmission(error)))
    return { kind: "permanent", reason: "RejectedByApiServer", message: error.message };
  if (error instanceof PermanentError) return { kind: "permanent", reason: error.reason, message: error.message };
  if (error instanceof TemporaryError) return { kind: "later", delaySeconds: error.delaySeconds, reason: error.reason, message: error.message };
  if (isInfrastructureFailure(error)) return { kind: "unavailable", message: thrownMessage(error) };
  return { kind: "retry", message: thrownMessage(error) };
}
