// Is a 401/403 the credential's, or the server's? A restarted kube-apiserver answers before its
// RBAC authorizer's caches are filled, and then refuses every ServiceAccount (403) for a few
// seconds: an outage, not a bad credential. The server says whether it is ready at /readyz
// (its checks include informer-sync and poststarthook/rbac/bootstrap-roles), which the default
// RBAC opens to everyone (ClusterRole system:public-info-viewer, bound to system:authenticated
// and system:unauthenticated). So on a refusal we ask it:
//  * /readyz asked anonymously (no client certificate, no token), then, if anonymous requests
//    are refused (--anonymous-auth=false), with the client's own credential;
//  * 200: ready, so the refusal stands (the credential's, or a real RBAC refusal);
//  * any other status, or no answer: not ready, an outage;
//  * 403 to the client's credential: the server knows who asks but denies what the default RBAC
//    grants every authenticated identity, i.e. its RBAC is not in force yet: an outage;
//  * 401 to the client's credential: the credential itself is refused.
// Besides, a refusal within WINDOW_MS of the server's return (this client saw it unreachable,
// then answering) is taken for the warm-up without asking.

/** How long after the API server answers again a 401/403 counts as its warm-up, whatever /readyz says. */
export const RETURN_WINDOW_MS = 10_000;
/** A /readyz answer is reused this long: a burst of refusals asks once. */
const ANSWER_TTL_MS = 1000;

/** A /readyz request's outcome: its status, or "unreachable". */
export type ReadyzAnswer = number | "unreachable";

export interface ReadinessOptions {
  /** GET /readyz without any credential. */
  anonymous: () => Promise<ReadyzAnswer>;
  /** GET /readyz with the client's credential. */
  authenticated: () => Promise<ReadyzAnswer>;
  /** Milliseconds, monotonic enough (Date.now, or a fake clock in tests). */
  now: () => number;
  windowMs?: number;
}

/** undefined: ready (the refusal stands); a string: why the server is not ready (the refusal is an outage). */
export type Readiness = string | undefined;

export class ServerReadiness {
  readonly #o: ReadinessOptions;
  #unreachable = false;
  #returnedAt = -Infinity;
  #asked: { at: number; answer: Promise<Readiness> } | undefined;

  constructor(o: ReadinessOptions) {
    this.#o = o;
  }

  /** A request got no answer. */
  sawUnreachable(): void {
    this.#unreachable = true;
  }

  /** A request got an answer (any status). */
  sawAnswer(): void {
    if (!this.#unreachable) return;
    this.#unreachable = false;
    this.#returnedAt = this.#o.now();
  }

  /** Why a 401/403 just received is the server's not being ready, or undefined when it is ready. */
  notReadyReason(): Promise<Readiness> {
    const now = this.#o.now();
    const since = now - this.#returnedAt;
    if (since < (this.#o.windowMs ?? RETURN_WINDOW_MS)) return Promise.resolve(`it answered again ${Math.round(since)} ms ago`);
    if (this.#asked && now - this.#asked.at < ANSWER_TTL_MS) return this.#asked.answer;
    const answer = this.#ask();
    this.#asked = { at: now, answer };
    return answer;
  }

  async #ask(): Promise<Readiness> {
    const anonymous = await this.#o.anonymous();
    if (anonymous === 200) return undefined;
    if (anonymous !== 401 && anonymous !== 403) return `/readyz answered ${anonymous}`;
    const own = await this.#o.authenticated();
    if (own === 200 || own === 401) return undefined;
    if (own === 403) return "/readyz refused to an authenticated identity (its RBAC is not in force yet)";
    return `/readyz answered ${own}`;
  }
}
