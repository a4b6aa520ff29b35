// How often a part-filled batch may go: a token bucket refilled one token per linger, holding at
// most a few. Under a stream faster than one change per linger the tokens run out and a request
// carries several changes (each request is billed); under a slower one, or after a quiet spell,
// a change goes at once. A minimum spacing between sends (one per linger) gave the same cap but
// held changes arriving at about that rate for nothing (docs/performance.md, "the linger is a
// pace, not a spacing").
// Hand-written: the publisher's pump needs the time the next token is due, on its injected
// clock, which rate-limiter libraries keep behind their own timers.

/** Part-filled sends that may go back to back after a quiet spell. */
export const SEND_BURST = 4;

export class SendCredit {
  #everyMs: number;
  #tokens = SEND_BURST;
  #at: number | undefined;

  /** `everyMs` ≤ 0: no limit. */
  constructor(everyMs: number) {
    this.#everyMs = everyMs;
  }

  /** From `now` on, one token per `everyMs` (what was earned until now stays); whether that changed the pace. */
  pace(now: number, everyMs: number): boolean {
    if (everyMs === this.#everyMs) return false;
    this.#tokens = this.#tokensAt(now);
    if (this.#at !== undefined) this.#at = now;
    this.#everyMs = everyMs;
    return true;
  }

  /** When a part-filled send may go: `now`, or the time its token is due. */
  dueAt(now: number): number {
    const tokens = this.#tokensAt(now);
    return tokens >= 1 ? now : now + (1 - tokens) * this.#everyMs;
  }

  /** A request went out (a full one too: it spends what is there, never below none). */
  spend(now: number): void {
    if (this.#everyMs <= 0) return;
    this.#tokens = Math.max(0, this.#tokensAt(now) - 1);
    this.#at = now;
  }

  #tokensAt(now: number): number {
    if (this.#everyMs <= 0 || this.#at === undefined) return this.#tokens;
    return Math.min(SEND_BURST, this.#tokens + (now - this.#at) / this.#everyMs);
  }
}
