// Delayed re-deliveries of one object: "reconcile again in N seconds" (requeueAfterSeconds) and
// "try again later" (TemporaryError, unfinished finalize), both as new key events.
import type { KeyEvent } from "../../core/event.ts";
import type { KubeObject } from "./kube-api.ts";
import type { Outcome } from "./outcome.ts";
import type { Step } from "./step.ts";

/** The event to send again, naming the object as it was last read. */
export function requeueEvent(step: Step, object: KubeObject, reason: "requeue" | "retry"): KeyEvent {
  const { event } = step;
  return {
    ...event,
    uid: object.metadata.uid ?? event.uid,
    resourceVersion: object.metadata.resourceVersion ?? event.resourceVersion,
    generation: object.metadata.generation ?? event.generation,
    type: "RESYNC",
    reason,
    observedAt: step.clock().toISOString(),
  };
}

/** Without a requeuer the message fails instead: its visibility timeout is the delay. */
export async function retryLater(step: Step, object: KubeObject, delaySeconds: number, detail: string): Promise<Outcome> {
  if (!step.requeuer) return { result: "retry", detail };
  await step.requeuer.schedule(requeueEvent(step, object, "retry"), step.clock().getTime() + delaySeconds * 1000);
  return { result: "retry-later", delaySeconds, detail };
}

/**
 * requeueAfterSeconds keeps ONE chain of delayed events per object: the reconcile that first
 * observes a generation starts it (exactly one status write can advance observedGeneration,
 * thanks to the resourceVersion precondition), each requeue continues it, and a requeue for an
 * older generation ends it. Re-announcements of an unchanged object never start another.
 * One per message: a 409 retry of the same message does not schedule twice.
 */
export function requeueChain(step: Step): { continue(object: KubeObject, afterSeconds: number | undefined, advancing: boolean): Promise<void> } {
  let scheduledGeneration: number | undefined;
  return {
    async continue(object, afterSeconds, advancing) {
      const generation = object.metadata.generation ?? 0;
      if (afterSeconds === undefined || !step.requeuer || scheduledGeneration === generation) return;
      if (step.event.reason !== "requeue" && !advancing) return;
      // Scheduled before the status write: a failed write after this may duplicate a chain
      // (harmless, it dies at the next generation) but never lose it.
      scheduledGeneration = generation;
      await step.requeuer.schedule(requeueEvent(step, object, "requeue"), step.clock().getTime() + afterSeconds * 1000);
    },
  };
}

export type RequeueChain = ReturnType<typeof requeueChain>;
