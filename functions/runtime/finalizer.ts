// The finalizer's two moments: added before the first reconcile, removed once finalize is done.
import { PermanentError, TemporaryError } from "../../core/errors.ts";
import type { CustomObject, ObjectReference } from "../../core/operator.ts";
import { ownedRef } from "./owned-kinds.ts";
import type { KubeObject } from "./kube-api.ts";
import type { Outcome } from "./outcome.ts";
import { FinalizeThrew } from "./failure.ts";
import { sameJson } from "../../core/canonical-json.ts";
import { nextReconcile, previousAttempts, scheduledStatus } from "./status.ts";
import type { ObjectStatus } from "../../core/operator.ts";
import type { Step } from "./step.ts";
import { thrownMessage } from "./thrown.ts";

const DEFAULT_FINALIZE_RETRY_SECONDS = 5;


/** Adds the operator's finalizer (conditional on the resourceVersion read) and returns the object after. */
export async function ensureFinalizer(step: Step, object: KubeObject): Promise<KubeObject> {
  const ours = step.operator.finalizer;
  const finalizers = object.metadata.finalizers ?? [];
  if (!ours || finalizers.includes(ours)) return object;
  return step.api.mergePatch(step.ref, { metadata: { resourceVersion: object.metadata.resourceVersion, finalizers: [...finalizers, ours] } }, step.operator.fieldManager);
}

/** The object is being deleted: run finalize, and drop the finalizer only when it is done. */
export async function finalizeObject(step: Step, object: KubeObject): Promise<Outcome> {
  const { operator } = step;
  const ours = operator.finalizer;
  const finalizers = object.metadata.finalizers ?? [];
  if (!ours || !finalizers.includes(ours)) return { result: "success", detail: "being deleted; not ours to finalize" };
  if (operator.finalize) {
    // A spec that no longer validates must not block deletion: finalize sees it as stored.
    const parsed = operator.spec.safeParse(object.spec);
    const typed = { ...object, spec: parsed.success ? parsed.data : object.spec } as unknown as CustomObject<unknown>;
    // What the runtime's own API calls (ctx.release) throw is classified as such (an outage of
    // the API server defers the message); anything else finalize throws — its own I/O included:
    // an outage of the user's cloud API is not the cluster's — is FinalizeError, retried with backoff.
    const ours = new WeakSet<object>();
    const releasing = async (o: ObjectReference): Promise<void> => {
      try {
        await release(step, o, object);
      } catch (e) {
        if (typeof e === "object" && e !== null) ours.add(e);
        throw e;
      }
    };
    let result;
    try {
      result = await operator.finalize(typed, { now: step.clock(), release: releasing, env: step.env });
    } catch (thrown) {
      if (thrown instanceof PermanentError || thrown instanceof TemporaryError || (typeof thrown === "object" && thrown !== null && ours.has(thrown))) throw thrown;
      throw new FinalizeThrew(thrownMessage(thrown));
    }
    if (!result.done) return await finalizeLater(step, object, result.retryAfterSeconds ?? DEFAULT_FINALIZE_RETRY_SECONDS);
  }
  await step.api.mergePatch(step.ref, { metadata: { resourceVersion: object.metadata.resourceVersion, finalizers: finalizers.filter((f) => f !== ours) } }, step.operator.fieldManager);
  return { result: "success", detail: "finalized" };
}

/** Finalize is not done yet: the finalizer stays, and the object records when to try again (the bridge announces it). */
async function finalizeLater(step: Step, object: KubeObject, delaySeconds: number): Promise<Outcome> {
  const previous = object.status as ObjectStatus | undefined;
  const attempts = previousAttempts(previous, object.metadata.generation ?? 0, "Finalize") + 1;
  const status = scheduledStatus(previous, nextReconcile("Finalize", new Date(step.clock().getTime() + delaySeconds * 1000), attempts));
  if (!sameJson(status, previous)) await step.api.replaceStatus(step.ref, { ...object, status }, step.operator.fieldManager);
  return { result: "retry-later", delaySeconds, detail: "finalize not done" };
}

/** Applying an object with no fields drops every field this manager owned (server-side apply). */
async function release(step: Step, o: ObjectReference, parent: KubeObject): Promise<void> {
  const target = ownedRef(step.operator, o.apiVersion, o.kind, o.namespace ?? parent.metadata.namespace, o.name);
  if (!target) throw new PermanentError(`release: ${o.kind} (${o.apiVersion}) is not among the kinds this operator owns`, "UndeclaredKind");
  if (!(await step.api.get(target))) return;
  const body = { apiVersion: o.apiVersion, kind: o.kind, metadata: { name: o.name, ...(target.namespace ? { namespace: target.namespace } : {}) } };
  await step.api.apply(target, body, sharedFieldManager(step, parent));
}

/** Each parent's own manager on a shared object, so server-side apply merges the contributions. */
export function sharedFieldManager(step: Step, parent: KubeObject): string {
  return `${step.operator.fieldManager}-${parent.metadata.uid ?? ""}`;
}
