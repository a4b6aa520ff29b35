// When each object is due to be announced again: at most one time per object, one timer for
// all of them. A binary heap ordered by time, with stale heap nodes skipped on the way out
// (a later set() or clear() of a key outdates its node), so every change is O(log n) and 100k
// objects cost a few MiB (hand-written: fifty lines, where a heap package would be a dependency
// for one data structure). What is due is what the objects' own status says (core/schedule.ts):
// this is a cache of it, rebuilt from a list after a restart or failover.

/**
 * Timers as the bridge sets them: injected so that a unit test drives time with a fake clock
 * (test/support/fake-clock.ts) instead of waiting for it; startBridge passes `systemTimers()`.
 */
export interface Timers {
  /** Calls `fn` once, `ms` from now; returns what cancels it. `background`: the timer alone does not keep the process alive. */
  after(ms: number, fn: () => void, background?: boolean): () => void;
}

/** Node's own timers. */
export function systemTimers(): Timers {
  return {
    after(ms, fn, background = false) {
      const timer = setTimeout(fn, ms);
      if (background) timer.unref();
      return () => clearTimeout(timer);
    },
  };
}

interface Node {
  atMs: number;
  key: string;
  /** Which set() of the key this node was; older ones are stale. */
  seq: number;
}

export interface DueScheduleOptions {
  now: () => number;
  timers: Timers;
  /** Called once per due key, in time order. */
  onDue: (key: string) => void;
}

export class DueSchedule {
  readonly #options: DueScheduleOptions;
  readonly #heap: Node[] = [];
  readonly #current = new Map<string, Node>();
  #seq = 0;
  #cancelTimer: (() => void) | undefined;
  #timerAt = Infinity;
  #stopped = false;

  constructor(options: DueScheduleOptions) {
    this.#options = options;
  }

  get size(): number {
    return this.#current.size;
  }

  /** The time a key is due, if any. */
  dueAt(key: string): number | undefined {
    return this.#current.get(key)?.atMs;
  }

  set(key: string, atMs: number): void {
    if (this.#current.get(key)?.atMs === atMs) return;
    const node = { atMs, key, seq: ++this.#seq };
    this.#current.set(key, node);
    this.#push(node);
    this.#arm();
  }

  clear(key: string): void {
    this.#current.delete(key);
  }

  stop(): void {
    this.#stopped = true;
    this.#cancelTimer?.();
    this.#cancelTimer = undefined;
  }

  #fire(): void {
    this.#cancelTimer = undefined;
    this.#timerAt = Infinity;
    const now = this.#options.now();
    for (;;) {
      const top = this.#heap[0];
      if (top === undefined || this.#stopped) break;
      if (this.#current.get(top.key) !== top) {
        this.#pop();
        continue;
      }
      if (top.atMs > now) break;
      this.#pop();
      this.#current.delete(top.key);
      this.#options.onDue(top.key);
    }
    this.#arm();
  }

  #arm(): void {
    if (this.#stopped) return;
    // Skip stale nodes so the timer is set for a live one.
    while (this.#heap[0] !== undefined && this.#current.get(this.#heap[0].key) !== this.#heap[0]) this.#pop();
    const next = this.#heap[0]?.atMs;
    if (next === undefined || next >= this.#timerAt) return;
    this.#cancelTimer?.();
    this.#timerAt = next;
    // A timer takes at most 2^31-1 ms; a later time re-arms when that one fires.
    this.#cancelTimer = this.#options.timers.after(Math.min(2 ** 31 - 1, Math.max(0, next - this.#options.now())), () => this.#fire(), true);
  }

  #push(node: Node): void {
    const h = this.#heap;
    h.push(node);
    let i = h.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (h[parent]!.atMs <= node.atMs) break;
      h[i] = h[parent]!;
      i = parent;
    }
    h[i] = node;
  }

  #pop(): void {
    const h = this.#heap;
    const last = h.pop();
    if (last === undefined || h.length === 0) return;
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let smallest = i;
      const at = (j: number) => (j === i ? last.atMs : h[j]!.atMs);
      if (l < h.length && at(l) < at(smallest)) smallest = l;
      if (r < h.length && at(r) < at(smallest)) smallest = r;
      if (smallest === i) break;
      h[i] = h[smallest]!;
      i = smallest;
    }
    h[i] = last;
  }
}
