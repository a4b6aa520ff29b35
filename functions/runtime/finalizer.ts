// The finalizer's two moments: added before the first reconcile, removed once finalize is done.
import { PermanentError, TemporaryError } from "../../core/errors.ts";
import { type CustomObject, type ObjectReference, type ObjectStatus } from "../../core/operator.ts";
import { ownedRef, sharedFieldManager } from "./children.ts";
import type { KubeObject } from "./kube-api.ts";
import type { Outcome } from "./outcome.ts";
import { sameJson } from "../../core/canonical-json.ts";
import { nextReconcile, previousAttempts, scheduledStatus } from "./status.ts";
import type { EventContext } from "./event-context.ts";
import { FinalizeThrew } from "./user-code.ts";
import { step } from "./steps.ts";

const DEFAULT_FINALIZE_RETRY_SECONDS = 5;

/**
 * The finalizer before anything else: an object being deleted is finalized (the outcome says how
 * that went); any other gets the operator's finalizer, if it has none yet, and is reconciled as it
 * is after that.
 */
export async function finalizerFirst(ctx: EventContext, object: KubeObject): Promise<{ outcome: Outcome } | { object: KubeObject }> {
  if (object.metadata.deletionTimestamp) return { outcome: await finalizeObject(ctx, object) };
  return { object: await ensureFinalizer(ctx, object) };
}

/** Adds the operator's finalizer (conditional on the resourceVersion read) and returns the object after. */
async function ensureFinalizer(ctx: EventContext, object: KubeObject): Promise<KubeObject> {
  const ours = ctx.operator.finalizer;
  const finalizers = object.metadata.finalizers ?? [];
  if (!ours || finalizers.includes(ours)) return object;
  return step(
    ctx,
    "function write",
    () =>
      ctx.api.mergePatch(
        ctx.ref,
        { metadata: { resourceVersion: object.metadata.resourceVersion, finalizers: [...finalizers, ours] } },
        ctx.operator.fieldManager,
      ),
    { "crdfn.write": "finalizer" },
  );
}

/** The object is being deleted: run finalize, and drop the finalizer only when it is done. */
async function finalizeObject(ctx: EventContext, object: KubeObject): Promise<Outcome> {
  const { operator } = ctx;
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
    const releasing = async (released: ObjectReference): Promise<void> => {
      try {
        await release(ctx, released, object);
      } catch (e) {
        if (typeof e === "object" && e !== null) ours.add(e);
        throw e;
      }
    };
    let result;
    const finalize = operator.finalize.bind(operator);
    try {
      result = await step(ctx, "finalize", async () => finalize(typed, { now: ctx.clock(), release: releasing, env: ctx.env }));
    } catch (thrown) {
      if (thrown instanceof PermanentError || thrown instanceof TemporaryError || (typeof thrown === "object" && thrown !== null && ours.has(thrown)))
        throw thrown;
      throw new FinalizeThrew(thrown);
    }
    if (!result.done) return await finalizeLater(ctx, object, result.retryAfterSeconds ?? DEFAULT_FINALIZE_RETRY_SECONDS);
  }
  await step(
    ctx,
    "function write",
    () =>
      ctx.api.mergePatch(
        ctx.ref,
        { metadata: { resourceVersion: object.metadata.resourceVersion, finalizers: finalizers.filter((f) => f !== ours) } },
        ctx.operator.fieldManager,
      ),
    { "crdfn.write": "finalizer" },
  );
  return { result: "success", detail: "finalized" };
}

/** Finalize is not done yet: the finalizer stays, and the object records when to try again (the bridge announces it). */
async function finalizeLater(ctx: EventContext, object: KubeObject, delaySeconds: number): Promise<Outcome> {
  const previous = object.status as ObjectStatus | undefined;
  const attempts = previousAttempts(previous, object.metadata.generation ?? 0, "Finalize") + 1;
  const status = scheduledStatus(
    previous,
    nextReconcile("Finalize", new Date(ctx.clock().getTime() + delaySeconds * 1000), { attempts, traceparent: ctx.traceparent }),
  );
  if (!sameJson(status, previous)) await ctx.api.replaceStatus(ctx.ref, { ...object, status }, ctx.operator.fieldManager);
  return { result: "retry-later", delaySeconds, detail: "finalize not done" };
}

/** Applying an object with no fields drops every field this manager owned (server-side apply). */
async function release(ctx: EventContext, released: ObjectReference, parent: KubeObject): Promise<void> {
  const { apiVersion, kind, name } = released;
  const target = ownedRef(ctx.operator, apiVersion, kind, released.namespace ?? parent.metadata.namespace, name);
  if (!target) throw new PermanentError(`release: ${kind} (${apiVersion}) is not among the kinds this operator owns`, "UndeclaredKind");
  if (!(await ctx.api.get(target))) return;
  const body = { apiVersion, kind, metadata: { name, ...(target.namespace ? { namespace: target.namespace } : {}) } };
  await ctx.api.apply(target, body, sharedFieldManager(ctx, parent));
}
