// Per event: read the object fresh, finalize or reconcile it, write only what changed, with
// resourceVersion preconditions. Level-triggered: the event names the object, never what to do.
import type { Logger } from "pino";
import { z } from "zod";
import { PermanentError } from "../../core/errors.ts";
import { parseKeyEvent, type KeyEvent } from "../../core/event.ts";
import { apiVersionOf, type CustomObject, type DesiredObject, type ObjectReference, type ObjectStatus, type Operator } from "../../core/operator.ts";
import { countingApi, type KubeApi, type KubeObject, type ResourceRef } from "./kube-api.ts";
import { DUE_AT_ATTRIBUTE, type QueueMessage } from "./message.ts";
import type { RuntimeMetrics } from "./metrics.ts";
import { classify, type Outcome } from "./outcome.ts";
import type { Requeuer } from "./requeue.ts";
import { failureStatus, sameJson, successStatus } from "./status.ts";

export interface RuntimeDeps {
  api: KubeApi;
  /** Absent: delayed re-deliveries fall back to failing the message (visibility timeout). */
  requeuer?: Requeuer;
  logger: Logger;
  clock: () => Date;
  /** Attempts per message when writes hit 409 Conflict. Default 5. */
  maxAttempts?: number;
  metrics?: RuntimeMetrics;
}

export type HandledOutcome = Outcome & { apiCalls: number };

export interface Runtime {
  handle(message: QueueMessage): Promise<HandledOutcome>;
}

/** Early deliveries within this margin count as due (clock skew between SQS and us). */
const DUE_SLACK_MS = 1000;
const DEFAULT_FINALIZE_RETRY_SECONDS = 5;

const resultSchema = z.object({
  children: z.array(z.looseObject({ apiVersion: z.string().min(1), kind: z.string().min(1), metadata: z.looseObject({ name: z.string().min(1) }) })).optional(),
  shared: z.array(z.looseObject({ apiVersion: z.string().min(1), kind: z.string().min(1), metadata: z.looseObject({ name: z.string().min(1) }) })).optional(),
  status: z.record(z.string(), z.unknown()).optional(),
  requeueAfterSeconds: z.number().positive().optional(),
});

export function createRuntime<Spec>(operator: Operator<Spec>, deps: RuntimeDeps): Runtime {
  const maxAttempts = deps.maxAttempts ?? 5;
  const { resource } = operator;

  function ownedRef(apiVersion: string, kind: string, namespace: string | undefined, name: string): ResourceRef {
    const owned = operator.owns.find((o) => apiVersionOf(o.group, o.version) === apiVersion && o.kind === kind);
    if (!owned) throw new PermanentError(`${kind} (${apiVersion}) is not among the kinds this operator owns`, "InvalidReconcileResult");
    return { group: owned.group, version: owned.version, plural: owned.plural, name, ...(owned.namespaced && namespace ? { namespace } : {}) };
  }

  async function handle(message: QueueMessage): Promise<HandledOutcome> {
    const { api, calls } = countingApi(deps.api);
    const parsed = parseKeyEvent(message.body);
    if (!parsed.ok) {
      // Logged once (first receive), then failed on every receive until the queue dead-letters it.
      if ((message.receiveCount ?? 1) <= 1) deps.logger.error({ messageId: message.id, error: parsed.error }, "malformed key event; leaving it for the dead-letter queue");
      else deps.logger.debug({ messageId: message.id, receiveCount: message.receiveCount }, "malformed key event received again");
      return { result: "dead-letter", detail: "malformed key event", apiCalls: 0 };
    }
    const event = parsed.event;
    const log = deps.logger.child({ messageId: message.id, object: `${event.namespace ?? ""}/${event.name}`, reason: event.reason ?? event.type });
    if (event.group !== resource.group || event.plural !== resource.plural) {
      if ((message.receiveCount ?? 1) <= 1) log.error({ group: event.group, plural: event.plural }, "key event for a resource this operator does not serve");
      return { result: "dead-letter", detail: "not this operator's resource", apiCalls: 0 };
    }
    const started = deps.clock().getTime();
    const outcome = await processEvent(event, message, api, log);
    const done = { ...outcome, apiCalls: calls() };
    const finished = deps.clock().getTime();
    // Lag only for the bridge's own announcements: a requeue's observedAt is its scheduling time.
    const lagSeconds = event.reason === "requeue" || event.reason === "retry" ? undefined : (finished - Date.parse(event.observedAt)) / 1000;
    log.info({ outcome: done.result, detail: done.detail, apiCalls: done.apiCalls, receiveCount: message.receiveCount }, "handled");
    deps.metrics?.observe({ kind: resource.kind, result: done.result, apiCalls: done.apiCalls, seconds: (finished - started) / 1000, ...(lagSeconds === undefined ? {} : { lagSeconds }) });
    return done;
  }

  async function processEvent(event: KeyEvent, message: QueueMessage, api: KubeApi, log: Logger): Promise<Outcome> {
    const dueAt = Number(message.attributes?.[DUE_AT_ATTRIBUTE] ?? 0);
    const ref: ResourceRef = { group: resource.group, version: resource.version, plural: resource.plural, name: event.name, ...(resource.scope === "Namespaced" && event.namespace ? { namespace: event.namespace } : {}) };
    const scheduled: { generation?: number } = {};
    let current: KubeObject | undefined;
    for (let attempt = 1; attempt <= maxAttempts; attempt++) {
      try {
        if (deps.requeuer && dueAt > deps.clock().getTime() + DUE_SLACK_MS) {
          await deps.requeuer.schedule(event, dueAt);
          return { result: "success", detail: "not due yet; re-sent" };
        }
        current = await api.get(ref);
        if (!current) return { result: "success", detail: "object is gone" };
        // A requeue chain belongs to one generation (see reconcileObject).
        if (event.reason === "requeue" && current.metadata.generation !== event.generation) return { result: "success", detail: "requeue superseded by a newer generation" };
        return await reconcileObject(current, event, api, ref, scheduled, (o) => (current = o));
      } catch (error) {
        const verdict = classify(error);
        if (verdict.kind === "conflict") {
          log.debug({ attempt }, "409 Conflict; re-reading");
          continue;
        }
        // Not this object's fault: the adapter defers the message without spending its receives.
        if (verdict.kind === "unavailable") return { result: "unavailable", detail: verdict.message };
        try {
          if (verdict.kind === "permanent" && current) {
            await recordFailure(current, ref, api, verdict.reason, verdict.message);
            return { result: "permanent", detail: verdict.reason };
          }
          if (verdict.kind === "later" && current) return await retryLater(event, current, verdict.delaySeconds, verdict.message);
        } catch (writeError) {
          const writeVerdict = classify(writeError);
          if (writeVerdict.kind === "conflict") continue;
          if (writeVerdict.kind === "unavailable") return { result: "unavailable", detail: writeVerdict.message };
          return fail(log, `handling ${verdict.kind} failed: ${(writeError as Error).message}`);
        }
        return fail(log, "message" in verdict ? verdict.message : String(error));
      }
    }
    return fail(log, `still conflicting after ${maxAttempts} attempts`);
  }

  /** Any other failure: fail the message; its visibility timeout is the backoff, the DLQ the limit. */
  function fail(log: Logger, detail: string): Outcome {
    log.warn({ error: detail }, "reconcile failed; the queue will redeliver");
    return { result: "retry", detail };
  }

  async function retryLater(event: KeyEvent, object: KubeObject, delaySeconds: number, detail: string): Promise<Outcome> {
    if (!deps.requeuer) return { result: "retry", detail };
    await deps.requeuer.schedule(requeueEvent(event, object, "retry"), deps.clock().getTime() + delaySeconds * 1000);
    return { result: "retry-later", delaySeconds, detail };
  }

  function requeueEvent(event: KeyEvent, object: KubeObject, reason: "requeue" | "retry"): KeyEvent {
    return {
      ...event,
      uid: object.metadata.uid ?? event.uid,
      resourceVersion: object.metadata.resourceVersion ?? event.resourceVersion,
      generation: object.metadata.generation ?? event.generation,
      type: "RESYNC",
      reason,
      observedAt: deps.clock().toISOString(),
    };
  }

  async function reconcileObject(
    object: KubeObject,
    event: KeyEvent,
    api: KubeApi,
    ref: ResourceRef,
    scheduled: { generation?: number },
    update: (o: KubeObject) => void,
  ): Promise<Outcome> {
    const now = deps.clock();
    const meta = object.metadata;
    const finalizers = meta.finalizers ?? [];
    const ours = operator.finalizer;
    const typed = (spec: unknown): CustomObject<Spec> => ({ ...(object as unknown as CustomObject<Spec>), spec: spec as Spec });

    if (meta.deletionTimestamp) {
      if (!ours || !finalizers.includes(ours)) return { result: "success", detail: "being deleted; not ours to finalize" };
      if (operator.finalize) {
        const parsedSpec = operator.spec.safeParse(object.spec);
        const result = await operator.finalize(typed(parsedSpec.success ? parsedSpec.data : object.spec), {
          now,
          release: (o) => release(o, object, api),
        });
        // Never drop the finalizer while cleanup is unfinished.
        if (!result.done) return retryLater(event, object, result.retryAfterSeconds ?? DEFAULT_FINALIZE_RETRY_SECONDS, "finalize not done");
      }
      await api.mergePatch(ref, { metadata: { resourceVersion: meta.resourceVersion, finalizers: finalizers.filter((f) => f !== ours) } });
      return { result: "success", detail: "finalized" };
    }

    if (ours && !finalizers.includes(ours)) {
      object = await api.mergePatch(ref, { metadata: { resourceVersion: meta.resourceVersion, finalizers: [...finalizers, ours] } });
      update(object);
    }

    const spec = operator.spec.safeParse(object.spec);
    if (!spec.success) throw new PermanentError(z.prettifyError(spec.error).replace(/\n+/g, "; "), "InvalidSpec");
    const result = operator.reconcile(typed(spec.data), { now });
    const checked = resultSchema.safeParse(result);
    if (!checked.success) throw new PermanentError(z.prettifyError(checked.error).replace(/\n+/g, "; "), "InvalidReconcileResult");

    const uid = object.metadata.uid ?? "";
    const ownerReference = { apiVersion: operator.apiVersion, kind: resource.kind, name: meta.name, uid, controller: true, blockOwnerDeletion: true };
    for (const child of result.children ?? []) {
      await applyDesired(api, child, object, { ownerReferences: [ownerReference] }, operator.fieldManager);
    }
    for (const shared of result.shared ?? []) {
      await applyDesired(api, shared, object, {}, sharedFieldManager(uid));
    }

    const generation = object.metadata.generation ?? 0;
    const previous = object.status as ObjectStatus | undefined;
    const advancing = previous?.observedGeneration !== generation;
    // requeueAfterSeconds keeps ONE chain of delayed events per object: the reconcile that first
    // observes a generation starts it (exactly one status write can advance observedGeneration,
    // thanks to the resourceVersion precondition), each requeue continues it, and a requeue for an
    // older generation ends it. Re-announcements of an unchanged object never start another.
    const wantsChain = result.requeueAfterSeconds !== undefined && (event.reason === "requeue" || advancing);
    if (wantsChain && deps.requeuer && scheduled.generation !== generation) {
      // Scheduled before the status write, once per message and generation: a failed write after
      // this may duplicate a chain (harmless, it dies at the next generation) but never lose it.
      scheduled.generation = generation;
      await deps.requeuer.schedule(requeueEvent(event, object, "requeue"), now.getTime() + (result.requeueAfterSeconds ?? 0) * 1000);
    }
    const status = successStatus(previous, result.status, generation, now);
    if (!sameJson(status, previous)) update(await api.replaceStatus(ref, { ...object, status }));
    return { result: "success", detail: "reconciled" };
  }

  async function applyDesired(api: KubeApi, desired: DesiredObject, parent: KubeObject, extraMeta: Record<string, unknown>, fieldManager: string): Promise<void> {
    const namespace = desired.metadata.namespace ?? parent.metadata.namespace;
    const target = ownedRef(desired.apiVersion, desired.kind, namespace, desired.metadata.name);
    const body: KubeObject = { ...desired, metadata: { ...desired.metadata, ...(target.namespace ? { namespace: target.namespace } : {}), ...extraMeta } };
    await api.apply(target, body, fieldManager);
  }

  /** Applying an object with no fields drops every field this manager owned (server-side apply). */
  async function release(o: ObjectReference, parent: KubeObject, api: KubeApi): Promise<void> {
    const target = ownedRef(o.apiVersion, o.kind, o.namespace ?? parent.metadata.namespace, o.name);
    if (!(await api.get(target))) return;
    await api.apply(target, { apiVersion: o.apiVersion, kind: o.kind, metadata: { name: o.name, ...(target.namespace ? { namespace: target.namespace } : {}) } }, sharedFieldManager(parent.metadata.uid ?? ""));
  }

  function sharedFieldManager(uid: string): string {
    return `${operator.fieldManager}-${uid}`;
  }

  async function recordFailure(object: KubeObject, ref: ResourceRef, api: KubeApi, reason: string, message: string): Promise<void> {
    const now = deps.clock();
    const generation = object.metadata.generation ?? 0;
    const previous = object.status as ObjectStatus | undefined;
    const status = failureStatus(previous, reason, message, generation, now);
    // Unchanged failure → no write and no second Event: retrying waits for the object to change.
    if (sameJson(status, previous)) return;
    await api.replaceStatus(ref, { ...object, status });
    const namespace = object.metadata.namespace ?? "default";
    await api.create({ group: "", version: "v1", plural: "events", namespace }, {
      apiVersion: "v1",
      kind: "Event",
      metadata: { generateName: `${object.metadata.name}.`, namespace },
      involvedObject: { apiVersion: operator.apiVersion, kind: resource.kind, name: object.metadata.name, namespace: object.metadata.namespace, uid: object.metadata.uid },
      type: "Warning",
      reason,
      message: message.slice(0, 1024),
      source: { component: operator.fieldManager },
      firstTimestamp: now.toISOString().replace(/\.\d{3}Z$/, "Z"),
      lastTimestamp: now.toISOString().replace(/\.\d{3}Z$/, "Z"),
      count: 1,
    });
  }

  return { handle };
}

