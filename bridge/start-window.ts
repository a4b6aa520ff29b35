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
// (p-limit, p-queue) hold a slot for a promise's life, not until another event answers it, and
// would hold a closure per waiting object.
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

/**
 * One resource's first-list work, waiting in the line its tracker keeps. The window holds no
 * per-object entry of its own for what waits: at 100k objects a closure and a key each came to
 * about 25 MiB of a 128 MiB heap. What leaves the line otherwise (answered, gone, announced by a
 * change of its own) the tracker takes out itself, and calls `changed`.
 */
export interface StartLine {
  /** How many wait in it. */
  readonly size: number;
  /** Takes the next object out of the line: its id (unique across lines) and its announcement. */
  take(): { id: string; release: () => Promise<void> } | undefined;
}

export class StartWindow {
  readonly #options: StartWindowOptions;
  /** Ids announced and not yet answered, with what cancels each one's timeout. */
  readonly #open = new Map<string, () => void>();
  /** The lines, in the order their lists released them; a line is dropped once empty. */
  #lines: StartLine[] = [];
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
    return this.#lines.reduce((n, line) => n + line.size, 0);
  }

  /** A resource's first-list work: each object is released (announced) when a slot is free. */
  add(line: StartLine): void {
    if (this.#stopped) return;
    this.#lines.push(line);
    this.changed();
  }

  /**
   * The object was answered (its status written), went, or was announced otherwise (a change of
   * its own): its slot is freed. For one still waiting its tracker has taken it out of its line.
   */
  settle(id: string): void {
    const cancel = this.#open.get(id);
    if (cancel !== undefined) {
      cancel();
      this.#open.delete(id);
    }
    this.changed();
  }

  /** Whether an id holds a slot (announced, waiting for its answer). */
  isOpen(id: string): boolean {
    return this.#open.has(id);
  }

  /** A line shrank, or a slot freed: fills the window again and reports the gauges. */
  changed(): void {
    this.#pump();
    this.#options.onChange?.(this.waiting, this.#open.size);
  }

  /** Drops what waits and every timeout (the engine is stopping). */
  stop(): void {
    this.#stopped = true;
    for (const cancel of this.#open.values()) cancel();
    this.#open.clear();
    this.#lines = [];
  }

  #pump(): void {
    const { size, timeoutMs, timers } = this.#options;
    while (!this.#stopped && (size === 0 || this.#open.size < size)) {
      const next = this.#take();
      if (next === undefined) return;
      const { id, release } = next;
      if (size > 0)
        this.#open.set(
          id,
          timers.after(timeoutMs, () => this.settle(id), true),
        );
      // The publisher logs what it cannot send (publisher.ts #ready); a throw past it frees the slot.
      this.#chain = this.#chain.then(release).catch(() => this.settle(id));
    }
  }

  #take(): ReturnType<StartLine["take"]> {
    while (this.#lines.length > 0) {
      const next = this.#lines[0]?.take();
      if (next !== undefined) return next;
      this.#lines.shift();
    }
    return undefined;
  }
}
