// One key event: read the object, reconcile it; on 409 Conflict read again and retry, a bounded
// number of times. Nothing here waits or schedules: what the object wants next is recorded in its
// status, and the bridge announces it when due.
import type { Outcome } from "./outcome.ts";
import { classify } from "./outcome.ts";
import { failMessage } from "./failure.ts";
import { prefetchChildren } from "./observed-children.ts";
import { reconcileObject } from "./reconcile-object.ts";
import type { Step } from "./step.ts";

export async function handleEvent(step: Step, maxAttempts: number): Promise<Outcome> {
  const { event } = step;
  for (let attempt = 1; attempt <= maxAttempts; attempt++) {
    try {
      // First read: not older than the version the event announces, which the API server serves
      // from its watch cache instead of a quorum read from etcd; a newer change has an event of
      // its own behind this one. After a 409 the cache may still lag our conflict: read etcd.
      const children = attempt === 1 ? prefetchChildren(step) : undefined;
      const object = await step.api.get(step.ref, attempt === 1 ? { notOlderThan: event.resourceVersion } : undefined);
      if (!object) return { result: "success", detail: "object is gone" };
      return await reconcileObject(step, object, children);
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
