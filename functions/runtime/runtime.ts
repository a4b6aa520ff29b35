// Per event: read the object fresh, finalize or reconcile it, write only what changed, with
// resourceVersion preconditions. Level-triggered: the event names the object, never what to do.
// This file turns a queue message into a key event and measures its handling; the steps of a
// reconcile live beside it (handle-event.ts → reconcile-object.ts → one file per step).
import type { Logger } from "pino";
import type { Operator } from "../../core/operator.ts";
import { verifyKeyEvent, type EventKeyring } from "../../core/event-auth.ts";
import { handleEvent } from "./handle-event.ts";
import { countingApi, type KubeApi } from "./kube-api.ts";
import { DEFERRED_SINCE_ATTRIBUTE, keyEventOf, type QueueMessage } from "./message.ts";
import type { RuntimeMetrics } from "./metrics.ts";
import type { Outcome } from "./outcome.ts";
import { parentRef } from "./step.ts";

export interface RuntimeDeps {
  api: KubeApi;
  logger: Logger;
  clock: () => Date;
  /**
   * The keys of the cluster this runtime serves (functions/clusters/event-keys.ts): an event whose
   * MAC none of them verifies is dead-lettered before anything reads its body.
   */
  eventKeys: EventKeyring;
  /** Attempts per message when writes hit 409 Conflict. Default 5. */
  maxAttempts?: number;
  metrics?: RuntimeMetrics;
  /** The function's environment (what it was built from), handed to effects and finalize. Default {}. */
  env?: Readonly<Record<string, string | undefined>>;
}

export type HandledOutcome = Outcome & { apiCalls: number };

export interface Runtime {
  handle(message: QueueMessage): Promise<HandledOutcome>;
  /** Writes measurements kept for a batch (EMF on Lambda); adapters call it once per invocation. */
  flushMetrics?(): void;
}

export function createRuntime<Spec>(typedOperator: Operator<Spec>, deps: RuntimeDeps): Runtime {
  const operator = typedOperator as Operator<unknown>;
  const { resource } = operator;
  const maxAttempts = deps.maxAttempts ?? 5;
  const controller = resource.kind.toLowerCase();

  async function handle(message: QueueMessage): Promise<HandledOutcome> {
    const parsed = keyEventOf(message);
    const firstReceive = (message.receiveCount ?? 1) <= 1;
    if (!parsed.ok) {
      // Logged once (first receive), then failed on every receive until the queue dead-letters it.
      if (firstReceive) deps.logger.error({ messageId: message.id, error: parsed.error }, "malformed key event; leaving it for the dead-letter queue");
      else deps.logger.debug({ messageId: message.id, receiveCount: message.receiveCount }, "malformed key event received again");
      return { result: "dead-letter", detail: "malformed key event", apiCalls: 0 };
    }
    const event = parsed.event;
    // Before anything uses the body: whoever may send to the queue is not thereby the bridge.
    const proof = verifyKeyEvent(event, deps.eventKeys);
    if (!proof.ok) {
      const object = `${event.kind} ${event.namespace ? `${event.namespace}/` : ""}${event.name}`;
      if (firstReceive) deps.logger.error({ messageId: message.id, cluster: event.cluster, object, kid: event.kid ?? null }, `key event for ${object} of cluster "${event.cluster}" refused: ${proof.message}; leaving it for the dead-letter queue`);
      else deps.logger.debug({ messageId: message.id, receiveCount: message.receiveCount }, "unverified key event received again");
      return { result: "dead-letter", detail: proof.message, apiCalls: 0 };
    }
    const log = deps.logger.child({ messageId: message.id, object: `${event.namespace ?? ""}/${event.name}`, reason: event.reason ?? event.type });
    if (event.group !== resource.group || event.plural !== resource.plural) {
      if (firstReceive) log.error({ group: event.group, plural: event.plural }, "key event for a resource this operator does not serve");
      return { result: "dead-letter", detail: "not this operator's resource", apiCalls: 0 };
    }
    const { api, calls } = countingApi(deps.api);
    const started = deps.clock().getTime();
    const firstDelivery = firstReceive && message.attributes?.[DEFERRED_SINCE_ATTRIBUTE] === undefined;
    const step = { operator, api, clock: deps.clock, log, event, ref: parentRef(operator, event), firstDelivery, env: deps.env ?? {} };
    const outcome = await handleEvent(step, maxAttempts);
    const done = { ...outcome, apiCalls: calls() };
    const finished = deps.clock().getTime();
    // observedAt is when the bridge saw the change, or when a scheduled reconcile fell due.
    const lagSeconds = (finished - Date.parse(event.observedAt)) / 1000;
    log.info({ outcome: done.result, detail: done.detail, apiCalls: done.apiCalls, receiveCount: message.receiveCount }, "handled");
    deps.metrics?.observe({ controller, outcome, apiCalls: done.apiCalls, seconds: (finished - started) / 1000, ...(lagSeconds === undefined ? {} : { lagSeconds }) });
    return done;
  }

  return { handle };
}
