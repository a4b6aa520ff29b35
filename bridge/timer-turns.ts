// Fair turns for the objects' timers. Neither SQS nor the local queue promises an order across
// FIFO groups (ElasticMQ serves the first group of a hash map with a visible message, every
// receive), so when timers ask for more reconciles than the functions give, the groups served
// first tick on and the others wait without end. The bridge schedules every timer, so it is the
// one place that can share the turns: while one object's announcement has gone unanswered past
// TURN_WAIT_MS though one sent after it was answered (the queue serves others first), no other
// object's timer is announced; the queue then drains what waits, the late groups with it. When
// nothing is answered (no function runs, or all are down) nobody is passed over, and the timers
// fire on time. Changes of the objects themselves are never held.
//
// Only announcements whose answer shows on the object are weighed: a timer's (its reconcile
// records the next due time afresh: a different one, or none) and a change's whose generation is
// not yet observed (its reconcile records observedGeneration). A child's change may leave the
// status as it was, so it is not weighed. An announcement unanswered for TURN_FORGET_MS
// (dead-lettered, say) no longer holds the others.

/** How long one object's timer announcement may wait unanswered before the other timers wait for it. */
export const TURN_WAIT_MS = 10_000;
/** After this, an unanswered announcement no longer holds the others. */
export const TURN_FORGET_MS = 120_000;
/** How often a held timer looks again. */
export const TURN_RECHECK_MS = 500;
/**
 * Announcements weighed at most: what decides is the oldest, so past this the newest go unweighed
 * (a flood of changes with no function running would otherwise keep one entry per object).
 */
export const TURN_MAX_WEIGHED = 10_000;

/** What an announcement waits for: the status to record another due time than `at`, or to observe `generation`. */
export type Awaited = { at: string } | { generation: number };

/** What the object's status records now. */
export interface Recorded {
  at: string | undefined;
  observedGeneration: number | undefined;
}

const answers = (w: Awaited, r: Recorded): boolean => ("at" in w ? r.at !== w.at : (r.observedGeneration ?? -1) >= w.generation);

export class TimerTurns {
  /** Announcements not yet answered: key → what answers it and when it went out; oldest first. */
  readonly #sent = new Map<string, { awaited: Awaited; sentMs: number }>();
  /** When the latest announcement answered so far was sent: one unanswered from before it was passed over. */
  #answeredSentMs = -Infinity;
  readonly #now: () => number;
  readonly #waitMs: number;
  readonly #forgetMs: number;

  constructor(now: () => number, waitMs = TURN_WAIT_MS, forgetMs = TURN_FORGET_MS) {
    this.#now = now;
    this.#waitMs = waitMs;
    this.#forgetMs = forgetMs;
  }

  /** Announcements awaiting their reconcile. */
  get unanswered(): number {
    return this.#sent.size;
  }

  /** An announcement of `key` went out, answered by `awaited`; it counts from now. */
  sent(key: string, awaited: Awaited): void {
    this.#sent.delete(key);
    this.#forgetOld(this.#now());
    if (this.#sent.size >= TURN_MAX_WEIGHED) return;
    this.#sent.set(key, { awaited, sentMs: this.#now() });
  }

  /** The object was seen; `recorded` reads its status (lazily: most objects have nothing unanswered). */
  seen(key: string, recorded: () => Recorded): void {
    const s = this.#sent.get(key);
    if (s === undefined || !answers(s.awaited, recorded())) return;
    this.#sent.delete(key);
    this.#answeredSentMs = Math.max(this.#answeredSentMs, s.sentMs);
  }

  gone(key: string): void {
    this.#sent.delete(key);
  }

  /** Drops what has waited past TURN_FORGET_MS, oldest first. */
  #forgetOld(now: number): void {
    for (const [k, s] of this.#sent) {
      if (now - s.sentMs <= this.#forgetMs) return;
      this.#sent.delete(k);
    }
  }

  /** Whether `key`'s timer waits its turn: another object's has gone unanswered for TURN_WAIT_MS, passed over by a later one. */
  mustWait(key: string): boolean {
    const now = this.#now();
    this.#forgetOld(now);
    // Oldest first: the first one decides.
    for (const [k, s] of this.#sent) if (k !== key) return now - s.sentMs >= this.#waitMs && s.sentMs < this.#answeredSentMs;
    return false;
  }
}
