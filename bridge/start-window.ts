// A starting bridge's announcements of its first lists' work, paced: at most `size` of them
// announced and not yet answered, the rest waiting in list order. Without it a cold start puts
// one event per existing object in the queue at once, and a queue whose cost grows with its
// depth (ElasticMQ's FIFO receive: `npm run bench:queuedepth`) or a function fleet offered 100k
// messages at once pays for the whole backlog; with it the queue holds at most `size` of them, as
// controller-runtime's worker count paces its first reconciles. An answer is the function's status
// write (or the object going); an object that is never answered (its message dead-lettered, its
// function down) frees its slot after `timeoutMs`, so a stuck window only slows, never stops.
//
// One window for the whole bridge, shared by the watched resources (engine.ts), so ten kinds
// starting together hold `size` in all, not ten times it. Hand-written: a semaphore with a
// timeout per slot, keyed so that a slot can be freed from outside; the queue packages at hand
// (p-limit, p-queue) hold a slot for a promise's life, not until another event answers it.
import type { Timers } from "./due-schedule.ts";

export interface StartWindowOptions {
  /** Announced and unanswered at most; 0: no window, each release runs at once. */
  size: number;
  /** A slot unanswered this long is freed. */
  timeoutMs: number;
  timers: Timers;
  /** How many wait and how many are open, after each change (gauges). */
  onChange?: (waiting: number, open: number) => void;
}

export class StartWindow {
  readonly #options: StartWindowOptions;
  /** Ids announced and not yet answered, with what cancels each one's timeout. */
  readonly #open = new Map<string, () => void>();
  /** Ids waiting for a slot, in the order they came (a Map keeps insertion order). */
  readonly #waiting = new Map<string, () => Promise<void>>();
  #stopped = false;
  /** Releases run one after another, in order, as the first list's loop ran them: the publisher's backpressure holds. */
  #chain: Promise<void> = Promise.resolve();

  constructor(options: StartWindowOptions) {
    this.#options = options;
  }

  /** Announced and not yet answered. */
  get open(): number {
    return this.#open.size;
  }

  get waiting(): number {
    return this.#waiting.size;
  }

  /** Runs `release` (the announcement) when a slot is free: now, or once an earlier one is answered. */
  add(id: string, release: () => Promise<void>): void {
    if (this.#stopped || this.#open.has(id)) return;
    this.#waiting.set(id, release);
    this.#pump();
    this.#report();
  }

  /**
   * The object was answered (its status written), went, or was announced otherwise (a change of
   * its own): its slot, or its place in the line, is freed.
   */
  settle(id: string): void {
    const waited = this.#waiting.delete(id);
    const cancel = this.#open.get(id);
    if (cancel === undefined) {
      if (waited) this.#report();
      return;
    }
    cancel();
    this.#open.delete(id);
    this.#pump();
    this.#report();
  }

  /** Whether an id holds a slot (announced, waiting for its answer). */
  isOpen(id: string): boolean {
    return this.#open.has(id);
  }

  /** Drops what waits and every timeout (the engine is stopping). */
  stop(): void {
    this.#stopped = true;
    for (const cancel of this.#open.values()) cancel();
    this.#open.clear();
    this.#waiting.clear();
  }

  #pump(): void {
    const { size, timeoutMs, timers } = this.#options;
    while (!this.#stopped && this.#waiting.size > 0 && (size === 0 || this.#open.size < size)) {
      const [id, release] = this.#waiting.entries().next().value as [string, () => Promise<void>];
      this.#waiting.delete(id);
      if (size > 0)
        this.#open.set(
          id,
          timers.after(timeoutMs, () => this.settle(id), true),
        );
      // The announce path logs its own failures (engine.ts announceTo); a throw past it frees the slot.
      this.#chain = this.#chain.then(release).catch(() => this.settle(id));
    }
  }

  #report(): void {
    this.#options.onChange?.(this.#waiting.size, this.#open.size);
  }
}
