// What can go wrong talking to the API server, as types: the bridge and the functions decide
// by these (never by an error's words) whether the server failed or the request did.
//  * ApiError: the server answered with an error status (about the request, unless below).
//  * ApiNotReady: it refused the credential (401/403) while it was not ready yet, e.g. a
//    restarted server whose RBAC caches are still warming up (server-readiness.ts).
//  * KubeUnreachable: no answer at all: a transport failure or the client's own timeout.

/** The API server answered with an error status (or a watch ERROR event carried one). */
export class ApiError extends Error {
  override name = "ApiError";
  /** The HTTP status (or a watch Status's code). */
  readonly code: number;
  /** The Status reason (NotFound, Conflict, Expired…), "Unknown" when the server gave none. */
  readonly reason: string;
  constructor(code: number, reason: string, message: string) {
    super(message);
    this.code = code;
    this.reason = reason;
  }
}

/**
 * A 401/403 answered while the API server was not ready (its /readyz not 200, or moments after
 * it came back): an outage, not a refused credential nor a real refusal. Still an ApiError with
 * the server's status, so code reading `code` sees what the server said.
 */
export class ApiNotReady extends ApiError {
  override name = "ApiNotReady";
  /** Why the server counts as not ready (its /readyz answer, or the window after its return). */
  readonly why: string;
  constructor(refusal: ApiError, why: string) {
    super(refusal.code, refusal.reason, `${refusal.message} (the API server is not ready: ${why})`);
    this.why = why;
  }
}

/** How the API server could not be reached. */
export type UnreachableKind = "timeout" | "silent" | "refused" | "reset" | "unresolved" | "network";

/** The API server gave no answer: the connection failed or broke, or the client's own timeout ran out. */
export class KubeUnreachable extends Error {
  override name = "KubeUnreachable";
  readonly kind: UnreachableKind;
  constructor(kind: UnreachableKind, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.kind = kind;
  }
}

/** Node's (and undici's) codes for a connection that failed or broke, by what they mean. */
const KIND_OF_CODE: Readonly<Record<string, UnreachableKind>> = {
  ECONNREFUSED: "refused",
  ECONNRESET: "reset",
  EPIPE: "reset",
  ECONNABORTED: "reset",
  UND_ERR_SOCKET: "reset",
  ETIMEDOUT: "timeout",
  UND_ERR_CONNECT_TIMEOUT: "timeout",
  EHOSTUNREACH: "network",
  ENETUNREACH: "network",
  ENOTFOUND: "unresolved",
  EAI_AGAIN: "unresolved",
};

/** The kind of transport failure an error's `code` (or its cause's) names; undefined for anything else (a TLS or certificate error is a setting to fix, not an outage). */
export function unreachableKindOf(error: unknown): UnreachableKind | undefined {
  const e = error as { code?: unknown; cause?: { code?: unknown } } | undefined;
  const code = e?.code ?? e?.cause?.code;
  return typeof code === "string" ? KIND_OF_CODE[code] : undefined;
}

/**
 * The API server itself failed, as every request of every object would meet alike: no answer
 * (KubeUnreachable, or any error carrying a transport code), a refusal while it is not ready
 * (ApiNotReady), load shed (429), cannot serve (503), or its own timeout (504).
 */
export function isServerOutage(error: unknown): boolean {
  if (error instanceof KubeUnreachable || error instanceof ApiNotReady) return true;
  if (error instanceof ApiError) return error.code === 429 || error.code === 503 || error.code === 504;
  return unreachableKindOf(error) !== undefined;
}
