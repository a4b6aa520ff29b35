// One key event: read the object, reconcile it; on 409 Conflict read again and retry, a bounded
// number of times. Nothing here waits or schedules: what the object wants next is recorded in its
// status, and the bridge announces it when due.
import type { Outcome } from "./outcome.ts";
import { classify } from "./outcome.ts";
import { failMessage } from "./failure.ts";
import { reconcileObject } from "./reconcile-object.ts";
import type { Step } from "./step.ts";
import type { KubeObject } from "./kube-api.ts";

/**
 * The object as the event carries it, when it may stand for a read: only on a message's first
 * delivery. A message delivered again (a held retry, a re-sent deferral) may have waited behind
 * newer ones of its object, so it reads the object afresh. Effects act outside the cluster, where
 * no fence stands (core/fence.ts fences children): they act only on a read from etcd.
 */
function announced(step: Step): KubeObject | undefined {
  const { event } = step;
  if (event.object === undefined || event.type === "DELETED" || !step.firstDelivery || step.operator.effects !== undefined) return undefined;
  return event.object as unknown as KubeObject;
}

/** A read on a first attempt: effects need etcd's (quorum) answer; anything else, one no older than the event's. */
const firstRead = (step: Step): Promise<KubeObject | undefined> => (step.operator.effects !== undefined ? step.api.get(step.ref) : step.api.get(step.ref, { notOlderThan: step.event.resourceVersion }));

export async function handleEvent(step: Step, maxAttempts: number): Promise<Outcome> {
  for (let attempt = 1; attempt <= maxAttempts; attempt++) {
    try {
      // First: the object the event carries, as the bridge saw it (a newer change has an event of
      // its own behind this one; children's fences refuse what it would set back), or else a
      // read. After a 409, or a fence's refusal, the world moved: read etcd.
      const object = attempt === 1 ? (announced(step) ?? (await firstRead(step))) : await step.api.get(step.ref);
      if (!object) return { result: "success", detail: "object is gone" };
      return await reconcileObject(step, object);
    } catch (error) {
      const verdict = classify(error);
      if (verdict.kind === "conflict") {
        step.log.debug({ attempt }, "409 Conflict; re-reading");
        continue;
      }
      // Not this object's fault: the adapter defers the message without spending its receives.
      if (verdict.kind === "unavailable") return { result: "unavailable", detail: verdict.message };
      return failMessage(step, "message" in verdict ? verdict.message : String(error));
    }
  }
  return failMessage(step, `still conflicting after ${maxAttempts} attempts`);
}
