// Records every reconcile as it enters and leaves the runtime, per object, so a test can see two
// reconciles of one object overlapping in time (across receive loops, batches and adapters).
import { objectKey } from "../../core/event.ts";
import type { HandledOutcome, Runtime } from "../../functions/runtime/runtime.ts";

export interface Reconcile {
  key: string;
  /** The message's id and receive count: an overlap names both messages. */
  messageId: string;
  receiveCount: number | undefined;
  name: string;
  reason: string;
  result: string;
  startedAt: number;
  endedAt: number;
}

/** A reconcile still running. */
type Running = Omit<Reconcile, "result" | "endedAt">;

export class OverlapRecorder {
  readonly #active = new Map<string, Running[]>();
  /** Each reconcile that began while another of its object ran, with the ones it met. */
  readonly overlaps: Array<{ key: string; at: number; entering: Running; running: Running[] }> = [];
  readonly reconciles: Reconcile[] = [];

  wrap(runtime: Runtime): Runtime {
    return {
      ...runtime,
      handle: async (delivery) => {
        if (!delivery.ok) return runtime.handle(delivery);
        const { event, message } = delivery;
        const key = objectKey(event);
        const entry = {
          key,
          name: event.name,
          reason: event.reason ?? event.type,
          messageId: message.id,
          receiveCount: message.receiveCount,
          startedAt: Date.now(),
        };
        const running = this.#active.get(key) ?? [];
        if (running.length > 0) this.overlaps.push({ key, at: entry.startedAt, entering: entry, running: [...running] });
        this.#active.set(key, [...running, entry]);
        let outcome: HandledOutcome | undefined;
        try {
          outcome = await runtime.handle(delivery);
          return outcome;
        } finally {
          this.#active.set(
            key,
            (this.#active.get(key) ?? []).filter((e) => e !== entry),
          );
          this.reconciles.push({ ...entry, result: outcome?.result ?? "threw", endedAt: Date.now() });
        }
      },
      ...(runtime.flushMetrics ? { flushMetrics: () => runtime.flushMetrics?.() } : {}),
    };
  }

  /** How many reconciles are running now, across objects. */
  running(): number {
    let n = 0;
    for (const r of this.#active.values()) n += r.length;
    return n;
  }

  /** The reconciles of one object (by name) that started at or after `since`. */
  of(name: string, since = 0): Reconcile[] {
    return this.reconciles.filter((r) => r.name === name && r.startedAt >= since);
  }
}
