// What a reconcile wants next, recorded in the object itself so that nothing pending lives only
// in memory: the function writes `status.nextReconcile` with the status it writes anyway, and the
// bridge, which sees that write on its watch, announces the object into its own FIFO group when
// it is due. One field per object: one schedule, never forked, rebuilt by a new bridge from the
// objects themselves. Shared by both sides, like the key event.
import { z } from "zod";

/** The status field the runtime owns, beside observedGeneration and conditions. */
export const NEXT_RECONCILE_FIELD = "nextReconcile";

export const nextReasons = ["Retry", "Requeue", "Finalize"] as const;
/** Retry: a failure (backoff); Requeue: requeueAfterSeconds or a timer; Finalize: finalize not done yet. */
export type NextReason = (typeof nextReasons)[number];

export const nextReconcileSchema = z.object({
  /** When to reconcile again (RFC 3339). */
  at: z.iso.datetime({ offset: true }),
  reason: z.enum(nextReasons),
  /** Failed attempts of this generation so far (Retry and Finalize). */
  attempts: z.number().int().positive().optional(),
  /**
   * The W3C traceparent of the handling that scheduled it, when traced: the bridge links the due
   * change's new trace to it (crdfn.link), exact where the last change it sent may not be.
   */
  traceparent: z.string().max(55).optional(),
  /** A Requeue that is the operator's own timer (`every`), not a requeueAfterSeconds: the link says timer. */
  timer: z.boolean().optional(),
});

export type NextReconcile = z.infer<typeof nextReconcileSchema>;

/** The schedule an object's status records; undefined when it records none (or a malformed one: nothing to schedule). */
export function nextReconcileOf(status: unknown): NextReconcile | undefined {
  if (typeof status !== "object" || status === null) return undefined;
  const parsed = nextReconcileSchema.safeParse((status as Record<string, unknown>)[NEXT_RECONCILE_FIELD]);
  return parsed.success ? parsed.data : undefined;
}

/** The reason word a due announcement carries in its key event (core/event.ts `reason`). */
export const announceReason = (next: NextReconcile): string => next.reason.toLowerCase();

/**
 * Per-object backoff after the n-th failure of one generation: 1 s doubling to a cap of 5
 * minutes (from the 10th failure on). controller-runtime starts at 5 ms, which suits an
 * in-memory workqueue; every crdfn retry is a status write and a queued message, so it starts
 * at a second. A new generation is never held back by it: the bridge announces it at once.
 */
export const RETRY_BACKOFF = { initialMs: 1000, maxMs: 300_000, jitter: 0.1 } as const;
