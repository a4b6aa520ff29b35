// The two failures a user's reconcile can name. Anything else it throws counts as temporary
// with backoff; the runtime turns all of them into queue outcomes in one place.
//
// `instanceof` is answered by a registry-wide brand (Symbol.for), not by class identity: a user's
// operator bundled by the CLI, or a second copy of crdfn in node_modules, still throws errors the
// runtime recognises.
const TEMPORARY = Symbol.for("crdfn.TemporaryError");
const PERMANENT = Symbol.for("crdfn.PermanentError");

const branded = (value: unknown, brand: symbol): boolean => typeof value === "object" && value !== null && (value as Record<symbol, unknown>)[brand] === true;

/**
 * The world is not ready yet (a dependency is missing, a quota is exhausted): the runtime sets
 * `Ready=False` with `reason` and the message, and reconciles again after `delaySeconds`.
 */
export class TemporaryError extends Error {
  readonly delaySeconds: number;
  readonly reason: string;
  readonly [TEMPORARY] = true;
  constructor(message: string, delaySeconds = 30, reason = "TemporaryError") {
    super(message);
    this.name = "TemporaryError";
    this.delaySeconds = Math.max(0, Math.ceil(delaySeconds));
    this.reason = reason;
  }
  static override [Symbol.hasInstance](value: unknown): boolean {
    return branded(value, TEMPORARY);
  }
}

/**
 * Retrying cannot help until the object changes: the runtime sets `Ready=False` with `reason`
 * and the message, records a Kubernetes Event, and stops retrying.
 */
export class PermanentError extends Error {
  readonly reason: string;
  readonly [PERMANENT] = true;
  constructor(message: string, reason = "PermanentError") {
    super(message);
    this.name = "PermanentError";
    this.reason = reason;
  }
  static override [Symbol.hasInstance](value: unknown): boolean {
    return branded(value, PERMANENT);
  }
}
