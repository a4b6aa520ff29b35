// Records every reconcile as it enters and leaves the runtime, per object, so a test can see two
// reconciles of one object overlapping in time (across receive loops, batches and adapters).
import { objectKey, parseKeyEvent } from "../../core/event.ts";
import type { HandledOutcome, Runtime } from "../../functions/runtime/runtime.ts";

export interface Reconcile {
  key: string;
  name: string;
  reason: string;
  result: string;
  startedAt: number;
  endedAt: number;
}

export class OverlapRecorder {
  readonly #active = new Map<string, number>();
  readonly overlaps: Array<{ key: string; at: number }> = [];
  readonly reconciles: Reconcile[] = [];

  wrap(runtime: Runtime): Runtime {
    return {
      handle: async (message) => {
        const parsed = parseKeyEvent(message.body);
        if (!parsed.ok) return runtime.handle(message);
        const key = objectKey(parsed.event);
        const startedAt = Date.now();
        const inside = this.#active.get(key) ?? 0;
        if (inside > 0) this.overlaps.push({ key, at: startedAt });
        this.#active.set(key, inside + 1);
        let outcome: HandledOutcome | undefined;
        try {
          outcome = await runtime.handle(message);
          return outcome;
        } finally {
          this.#active.set(key, (this.#active.get(key) ?? 1) - 1);
          this.reconciles.push({ key, name: parsed.event.name, reason: parsed.event.reason ?? parsed.event.type, result: outcome?.result ?? "threw", startedAt, endedAt: Date.now() });
        }
      },
      ...(runtime.flushMetrics ? { flushMetrics: () => runtime.flushMetrics?.() } : {}),
    };
  }

  /** The reconciles of one object (by name) that started at or after `since`. */
  of(name: string, since = 0): Reconcile[] {
    return this.reconciles.filter((r) => r.name === name && r.startedAt >= since);
  }
}
