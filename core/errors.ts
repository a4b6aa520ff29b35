// The two failures a user's reconcile can name. Anything else it throws counts as temporary
// with backoff; the runtime turns all of them into queue outcomes in one place.

/** The world is not ready yet (a dependency is missing, a quota is exhausted): try again later. */
export class TemporaryError extends Error {
  readonly delaySeconds: number;
  constructor(delaySeconds: number, message = `retry in ${delaySeconds}s`) {
    super(message);
    this.name = "TemporaryError";
    this.delaySeconds = Math.max(0, Math.ceil(delaySeconds));
  }
}

/**
 * Retrying cannot help until the object changes: the runtime sets `Ready=False` with `reason`
 * and the message, records a Kubernetes Event, and stops retrying.
 */
export class PermanentError extends Error {
  readonly reason: string;
  constructor(message: string, reason = "PermanentError") {
    super(message);
    this.name = "PermanentError";
    this.reason = reason;
  }
}
