// One received key event, reconciled: read the object (or take the one the event carries), then
// finalize it or reconcile it, step by step, writing only what changed, with resourceVersion
// preconditions. Level-triggered: the event names the object, never what to do. This file says in
// which order the steps run; each step is a file of its own, entered once:
//   finalizer → spec → children's and references' reads (side by side) → effects, recorded at
//   once, then reconcile (pure) → children → status (what is next: a requeue, the timer, and what
//   it reconciled: core/reconciled.ts) → prune (after the status write's precondition, so only
//   from a current view: children.ts).
// Given a tracer, the handling is a "function handle" span with its time in the queue and each of
// these steps a span under it (steps.ts: function read, finalize, effects, reconcile, function write).
// A message becomes a received event before it gets here (delivery.ts): the adapter judges it once.
import { SpanKind, SpanStatusCode, type Span, type Tracer } from "@opentelemetry/api";
import type { Logger } from "pino";
import { operatorResource as resourceKey, type EventKeyring } from "../../core/event-auth.ts";
import { PermanentError } from "../../core/errors.ts";
import type { CustomObject, Operator } from "../../core/operator.ts";
import { reconciledRecord } from "../../core/reconciled.ts";
import type { ReferenceRecord } from "../../core/references.ts";
import { pruneChildren, writeChildren } from "./children.ts";
import { createReceiver, type Delivery, type QueueMessage, type Received, type Refused, type ServedEvents } from "./delivery.ts";
import { failMessage, onFailure } from "./failure.ts";
import { finalizerFirst } from "./finalizer.ts";
import { countingApi, type KubeApi, type KubeObject } from "./kube-api.ts";
import type { RuntimeMetrics } from "./metrics.ts";
import { classify, type Outcome } from "./outcome.ts";
import { parentRef, type EventContext } from "./event-context.ts";
import { readInputs } from "./reads.ts";
import { writeSuccessStatus } from "./status.ts";
import { effectsThenReconcile } from "./user-code.ts";
import { zodLine } from "../../core/config-error.ts";
import { objectKey } from "../../core/event.ts";
import { contextFrom, fieldsOf, within } from "../../clients/tracing.ts";
import { step, tracedSteps, type Steps } from "./steps.ts";

export interface RuntimeDeps {
  api: KubeApi;
  logger: Logger;
  clock: () => Date;
  /** The cluster this runtime serves: an event of any other is dead-lettered. */
  cluster: string;
  /**
   * The keys of this operator's events in that cluster (functions/clusters/registry.ts): an event
   * whose MAC none of them verifies is dead-lettered before anything reads its body.
   */
  eventKeys: EventKeyring;
  /** Attempts per message when writes hit 409 Conflict. Default 5. */
  maxAttempts?: number;
  metrics?: RuntimeMetrics;
  /** The function's environment (what it was built from), handed to effects and finalize. Default {}. */
  env?: Readonly<Record<string, string | undefined>>;
  /** Continues each change's trace from its verified event (clients/tracing.ts); untraced without. */
  tracer?: Tracer;
}

export type HandledOutcome = Outcome & { apiCalls: number };

export interface Runtime {
  /** The clusters (by their keys) and resources whose events this runtime takes. */
  served: ServedEvents;
  /** Judges a message once (delivery.ts): the verified event, or why it is a dead letter. */
  receive(message: QueueMessage): Delivery;
  /** Reconciles a received event; a refused one is answered with its dead-letter outcome. */
  handle(delivery: Delivery): Promise<HandledOutcome>;
  /** Writes measurements kept for a batch (EMF on Lambda); adapters call it once per invocation. */
  flushMetrics?(): void;
}

/** One message, received and handled: for callers that hold a single message and no circuit. */
export function handleMessage(runtime: Runtime, message: QueueMessage): Promise<HandledOutcome> {
  return runtime.handle(runtime.receive(message));
}

const refused = (delivery: Refused): HandledOutcome => ({ ...delivery.outcome, apiCalls: 0 });

/** One operator against one cluster's API server. */
export function createRuntime<Spec>(typedOperator: Operator<Spec>, deps: RuntimeDeps): Runtime {
  const operator = typedOperator as Operator<unknown>;
  const own = resourceKey(operator.resource);
  const served: ServedEvents = {
    keysOf: (cluster, resource) => (cluster === deps.cluster && resource === own ? deps.eventKeys : undefined),
    resources: [operator.resource],
  };
  const reconcile = reconcilerFor(operator, deps);
  return { served, receive: createReceiver(served, deps.logger), handle: async (delivery) => (delivery.ok ? reconcile(delivery) : refused(delivery)) };
}

/**
 * Several runtimes behind one queue, each event to the runtime of the resource it names: one
 * process serving several operators. An operator's events verify with its own runtime's keys only.
 */
export function runtimeByResource(runtimes: readonly Runtime[], logger: Logger): Runtime {
  const [first] = runtimes;
  if (!first) throw new Error("runtimeByResource needs at least one runtime");
  if (runtimes.length === 1) return first;
  const byResource = new Map(runtimes.flatMap((runtime) => runtime.served.resources.map((r) => [resourceKey(r), runtime] as const)));
  const served: ServedEvents = {
    keysOf: (cluster, resource) => byResource.get(resource)?.served.keysOf(cluster, resource),
    resources: [...byResource.values()].flatMap((r) => r.served.resources),
  };
  return {
    served,
    receive: createReceiver(served, logger),
    handle: async (delivery) => (delivery.ok ? byResource.get(resourceKey(delivery.event))!.handle(delivery) : refused(delivery)),
  };
}

/**
 * One queue may carry the events of many clusters: each goes to the runtime of the cluster it
 * names, built on that cluster's first event and kept (with its client's keep-alive connection
 * and token cache). A failed build (a CA file not there yet) is logged, and tried again on the
 * cluster's next event.
 */
export function runtimeByCluster(
  keys: ReadonlyMap<string, ReadonlyMap<string, EventKeyring>>,
  resources: ServedEvents["resources"],
  build: (cluster: string) => Promise<Runtime>,
  logger: Logger,
): Runtime {
  const served: ServedEvents = { keysOf: (cluster, resource) => keys.get(cluster)?.get(resource), resources };
  const built = new Map<string, Promise<Runtime>>();
  const runtimeOf = (cluster: string): Promise<Runtime> => {
    let runtime = built.get(cluster);
    if (!runtime) {
      built.set(cluster, (runtime = build(cluster)));
      runtime.catch((error: unknown) => {
        built.delete(cluster);
        logger.error({ cluster, error: (error as Error).message }, `cannot set up the client of cluster "${cluster}": ${(error as Error).message}`);
      });
    }
    return runtime;
  };
  return {
    served,
    receive: createReceiver(served, logger),
    handle: async (delivery) => (delivery.ok ? (await runtimeOf(delivery.event.cluster)).handle(delivery) : refused(delivery)),
  };
}

/** Each received event of this operator: its context, its reconcile, measured and logged once. */
function reconcilerFor(operator: Operator<unknown>, deps: RuntimeDeps): (received: Received) => Promise<HandledOutcome> {
  const maxAttempts = deps.maxAttempts ?? 5;
  const controller = operator.resource.kind.toLowerCase();
  return async (received) => {
    const { message, event, firstDelivery } = received;
    const log = deps.logger.child({ messageId: message.id, object: `${event.namespace ?? ""}/${event.name}`, reason: event.reason ?? event.type });
    const started = deps.clock().getTime();
    // Only a verified event gets here (createReceiver): a forged context never joins a trace.
    const traced = deps.tracer ? traceHandling(deps.tracer, received, deps.api) : undefined;
    const { api, calls } = countingApi(traced?.api ?? deps.api);
    // Recorded with what this handling schedules: the due change's trace links back to this one.
    const traceparent = traced ? fieldsOf(traced.span).traceparent : undefined;
    const outcome = await reconcileEvent(
      {
        operator,
        api,
        clock: deps.clock,
        log,
        event,
        ref: parentRef(operator, event),
        firstDelivery,
        env: deps.env ?? {},
        ...(traced ? { steps: traced.steps } : {}),
        ...(traceparent === undefined ? {} : { traceparent }),
      },
      maxAttempts,
    );
    const done = { ...outcome, apiCalls: calls() };
    if (traced) {
      const { span } = traced;
      span.setAttributes({ "crdfn.outcome": done.result, "crdfn.api_calls": done.apiCalls });
      if (done.result !== "success") span.setStatus({ code: SpanStatusCode.ERROR, message: done.detail ?? done.result });
      span.end();
    }
    const finished = deps.clock().getTime();
    // observedAt is when the bridge saw the change, or when a scheduled reconcile fell due.
    const lagSeconds = (finished - Date.parse(event.observedAt)) / 1000;
    log.info({ outcome: done.result, detail: done.detail, apiCalls: done.apiCalls, receiveCount: message.receiveCount }, "handled");
    deps.metrics?.observe({ controller, outcome, apiCalls: done.apiCalls, seconds: (finished - started) / 1000, lagSeconds });
    return done;
  };
}

/**
 * The "function handle" span of a verified event, continuing the trace its event carries, from
 * when it was received (its MAC's proof inside it, as crdfn.verify_ms: the proof comes before any
 * span may be trusted to continue); its time in the queue before that; the steps under it, and
 * an API whose requests are spans of the step running when they are made.
 */
function traceHandling(tracer: Tracer, received: Received, api: KubeApi): { span: Span; steps: Steps; api: KubeApi } {
  const { message, event, receivedAt, verifyMs } = received;
  const span = tracer.startSpan(
    "function handle",
    {
      kind: SpanKind.CONSUMER,
      ...(receivedAt === undefined ? {} : { startTime: receivedAt }),
      attributes: {
        "crdfn.object": objectKey(event),
        "crdfn.cause": event.reason ?? event.type,
        "k8s.object.uid": event.uid,
        "k8s.object.resource_version": event.resourceVersion,
        "messaging.message.id": message.id,
        ...(message.receiveCount === undefined ? {} : { "messaging.receive_count": message.receiveCount }),
        ...(verifyMs === undefined ? {} : { "crdfn.verify_ms": Math.round(verifyMs * 1000) / 1000 }),
      },
    },
    contextFrom(event),
  );
  const handle = within(contextFrom(event), span);
  if (message.sentAt !== undefined && receivedAt !== undefined) {
    // The queue's clock and ours may disagree by a little: never a wait that ends before it starts.
    tracer
      .startSpan(
        "queue wait",
        { startTime: message.sentAt, attributes: { ...(message.system ? { "messaging.system": message.system } : {}), "messaging.message.id": message.id } },
        handle,
      )
      .end(Math.max(message.sentAt, receivedAt));
  }
  const { steps, current } = tracedSteps(tracer, handle);
  return { span, steps, api: api.under?.(current) ?? api };
}

/**
 * The object as the event carries it, when it may stand for a read: only on a message's first
 * delivery. A message delivered again (a held retry, a re-sent deferral) may have waited behind
 * newer ones of its object, so it reads the object afresh. Effects act outside the cluster, where
 * no fence stands (core/fence.ts fences children): they act only on a read from etcd.
 */
function announced(ctx: EventContext): KubeObject | undefined {
  const { event } = ctx;
  if (event.object === undefined || event.type === "DELETED" || !ctx.firstDelivery || ctx.operator.effects !== undefined) return undefined;
  return event.object as unknown as KubeObject;
}

// Which read a "function read" span is: the object's own, or its children's and references'.
const OBJECT_READ = { "crdfn.read": "object" };
const INPUTS_READ = { "crdfn.read": "children and references" };
const SUCCESS_WRITE = { "crdfn.write": "children and status" };

/** A read on a first attempt: effects need etcd's (quorum) answer; anything else, one no older than the event's. */
const firstRead = (ctx: EventContext): Promise<KubeObject | undefined> =>
  ctx.operator.effects !== undefined ? ctx.api.get(ctx.ref) : ctx.api.get(ctx.ref, { notOlderThan: ctx.event.resourceVersion });

/**
 * Reads the object and reconciles it; on 409 Conflict reads again and retries, a bounded number of
 * times. Nothing here waits or schedules: what the object wants next is recorded in its status,
 * and the bridge announces it when due.
 */
export async function reconcileEvent(ctx: EventContext, maxAttempts: number): Promise<Outcome> {
  for (let attempt = 1; attempt <= maxAttempts; attempt++) {
    ctx.steps?.attempt(attempt);
    try {
      // First: the object the event carries, as the bridge saw it (a newer change has an event of
      // its own behind this one; children's fences refuse what it would set back), or else a
      // read. After a 409, or a fence's refusal, the world moved: read etcd.
      const object =
        attempt === 1
          ? (announced(ctx) ?? (await step(ctx, "function read", () => firstRead(ctx), OBJECT_READ)))
          : await step(ctx, "function read", () => ctx.api.get(ctx.ref), OBJECT_READ);
      if (!object) return { result: "success", detail: "object is gone" };
      // A carried body is the event's own object (the schema says so); a read may find a later
      // object of the same name. The event's work belongs to the object it names, gone now.
      if (object.metadata.uid !== ctx.event.uid) return earlierIncarnation(ctx, object);
      return await reconcileObject(ctx, object);
    } catch (error) {
      const verdict = classify(error);
      if (verdict.kind === "conflict") {
        ctx.log.debug({ attempt }, "409 Conflict; re-reading");
        continue;
      }
      // Not this object's fault: the adapter defers the message without spending its receives.
      if (verdict.kind === "unavailable") return { result: "unavailable", detail: verdict.message };
      return failMessage(ctx, "message" in verdict ? verdict.message : String(error));
    }
  }
  return failMessage(ctx, `still conflicting after ${maxAttempts} attempts`);
}

/**
 * The event was written for an earlier object of this name (a dead letter redriven, a backlog that
 * spans a delete and a create, a replay): its work went with that object. Not a dead letter: the
 * live object has events of its own, and nothing is pending for the gone one.
 */
function earlierIncarnation(ctx: EventContext, live: KubeObject): Outcome {
  const detail = `the event is for uid ${ctx.event.uid}, an earlier object of this name; the live one is uid ${live.metadata.uid ?? "?"}: nothing done`;
  ctx.log.info({ eventUid: ctx.event.uid, liveUid: live.metadata.uid }, `event of an earlier incarnation: ${detail}`);
  return { result: "success", detail, earlierIncarnation: true };
}

/** The object with its spec parsed by the operator's schema (PermanentError InvalidSpec otherwise). */
function validObject(ctx: EventContext, object: KubeObject): CustomObject<unknown> {
  const spec = ctx.operator.spec.safeParse(object.spec);
  if (!spec.success) throw new PermanentError(zodLine(spec.error), "InvalidSpec");
  return { ...(object as unknown as CustomObject<unknown>), spec: spec.data };
}

/** One reconcile of an object just read. Throws only 409 Conflicts (the caller re-reads); every other failure becomes an outcome. */
async function reconcileObject(ctx: EventContext, read: KubeObject): Promise<Outcome> {
  let object = read;
  // What this attempt read, once known: recorded with its outcome, success or failure alike.
  let records: ReferenceRecord[] | undefined;
  try {
    const finalized = await finalizerFirst(ctx, object);
    if ("outcome" in finalized) return finalized.outcome;
    object = finalized.object;
    const now = ctx.clock();
    const valid = validObject(ctx, object);
    const { references, children } = await step(ctx, "function read", () => readInputs(ctx, object, valid), INPUTS_READ);
    records = references.records;
    const called = await effectsThenReconcile(ctx, object, valid, { now, children: children.view, references: references.objects, records });
    object = called.object;
    const requeue = await step(
      ctx,
      "function write",
      async () => {
        const { wanted, left, keys } = await writeChildren(ctx, object, called.result, children);
        const next = await writeSuccessStatus(
          ctx,
          object,
          called.result.status,
          now,
          [called.result.requeueAfterSeconds, called.effectsRequeueAfterSeconds],
          records,
          reconciledRecord(object, left),
        );
        await pruneChildren(ctx, object, keys, wanted);
        return next;
      },
      SUCCESS_WRITE,
    );
    return { result: "success", detail: "reconciled", ...(requeue === undefined ? {} : { requeue: "after" as const }) };
  } catch (error) {
    return onFailure(ctx, object, error, records);
  }
}

/** A runtime that is whichever `current()` answers at each call: one a reload swaps (`crdfn dev`). */
export function swappableRuntime(current: () => Runtime): Runtime {
  return {
    get served() {
      return current().served;
    },
    receive: (message) => current().receive(message),
    handle: (delivery) => current().handle(delivery),
    flushMetrics: () => current().flushMetrics?.(),
  };
}
