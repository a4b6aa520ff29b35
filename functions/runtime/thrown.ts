// The text of whatever was thrown: `[object Object]` and `undefined` are not messages.
export function thrownMessage(value: unknown): string {
  if (value instanceof Error) return value.message || value.name;
  if (typeof value === "string") return value || "an empty string was thrown";
  if (value === undefined || value === null) return `${String(value)} was thrown`;
  if (typeof value === "number" || typeof value === "boolean" || typeof value === "bigint") return `thrown: ${value}`;
  if (typeof value === "symbol") return `thrown: ${value.toString()}`;
  try {
    return `thrown: ${JSON.stringify(value) ?? Object.prototype.toString.call(value)}`;
  } catch {
    return `thrown: ${Object.prototype.toString.call(value)}`;
  }
}

/**
 * What the user's code threw (reconcile, effects, finalize), carried as its text. Never an outage
 * of the cluster, whatever its words say ("timed out" from a cloud API is that API's, not the
 * API server's): it is retried with the object's own backoff and shown on the object.
 */
export class UserCodeThrew extends Error {
  constructor(thrown: unknown, name: string) {
    super(thrownMessage(thrown));
    this.name = name;
  }
}
