// A clock that moves only when a test says so, with timers that fire as it passes them: what the
// bridge's parts take as `now` and `timers` (bridge/due-schedule.ts Timers), so a unit test proves
// "not before its time, then at once" without sleeping and without depending on the machine's load.
import type { Timers } from "../../bridge/due-schedule.ts";

interface FakeTimer {
  atMs: number;
  /** Creation order: timers due at the same time fire in the order they were set, as Node's do. */
  seq: number;
  fn: () => void;
}

export interface FakeClock {
  /** The current time. */
  now: () => Date;
  nowMs: () => number;
  timers: Timers;
  /** Timers set and not yet fired or cancelled. */
  readonly pending: number;
  /** Moves the clock `ms` forward, firing each timer that comes due on the way, at its own time. */
  advance: (ms: number) => void;
}

export function fakeClock(startMs = Date.parse("2026-11-21T00:00:00Z")): FakeClock {
  let nowMs = startMs;
  let seq = 0;
  const set = new Set<FakeTimer>();
  return {
    now: () => new Date(nowMs),
    nowMs: () => nowMs,
    timers: {
      after(ms, fn) {
        const timer = { atMs: nowMs + Math.max(0, ms), seq: seq++, fn };
        set.add(timer);
        return () => void set.delete(timer);
      },
    },
    get pending() {
      return set.size;
    },
    advance(ms) {
      const until = nowMs + ms;
      for (;;) {
        let next: FakeTimer | undefined;
        for (const t of set) if (t.atMs <= until && (next === undefined || t.atMs < next.atMs || (t.atMs === next.atMs && t.seq < next.seq))) next = t;
        if (next === undefined) break;
        set.delete(next);
        nowMs = next.atMs;
        next.fn();
      }
      nowMs = until;
    },
  };
}
