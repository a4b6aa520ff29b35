// What every step of one reconcile works with: the operator, the (counted) API, the verified event
// being handled and the parent's REST location. Built once per event (runtime.ts); read-only. Not
// what the user's code is given: that is ReconcileContext, EffectsContext or FinalizeContext (core).
import type { Logger } from "pino";
import type { KeyEvent } from "../../core/event.ts";
import type { Operator } from "../../core/operator.ts";
import type { KubeApi, ResourceRef } from "./kube-api.ts";
import type { Steps } from "./steps.ts";

export interface EventContext<Spec = unknown> {
  operator: Operator<Spec>;
  api: KubeApi;
  clock: () => Date;
  log: Logger;
  event: KeyEvent;
  /** The parent object's location. */
  ref: ResourceRef;
  /** The message is delivered for the first time (not held back, not re-sent): its body may stand for a read. */
  firstDelivery: boolean;
  /** The function's environment, for the user's effects and finalize to build cloud clients from. */
  env: Readonly<Record<string, string | undefined>>;
  /** Each step a span of the change's trace (steps.ts); untraced without. */
  steps?: Steps;
  /** The W3C traceparent of this handling's span, recorded with what it schedules (status.nextReconcile); untraced without. */
  traceparent?: string;
}

/** The parent's location: the operator's resource, the event's name (and namespace, when namespaced). */
export function parentRef(operator: Operator<unknown>, event: Pick<KeyEvent, "name" | "namespace">): ResourceRef {
  const { resource } = operator;
  return {
    group: resource.group,
    version: resource.version,
    plural: resource.plural,
    name: event.name,
    ...(resource.scope === "Namespaced" && event.namespace ? { namespace: event.namespace } : {}),
  };
}
