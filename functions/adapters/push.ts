// One Pub/Sub push delivery, settled by the policy Lambda and the local poller share (settle.ts),
// as push can carry it out: the HTTP status of the answer is the acknowledgement.
//   delete  → 200: acknowledged.
//   hold    → 503 (the API server is unavailable) or 500 (a failure the object could not
//             record): a negative acknowledgement; the subscription's retry policy is the
//             backoff, and the message keeps its place at the head of its ordering key.
//   resend  → a copy is published into the same ordering key on the function's own topic (its
//             delivery count starts again, behind whatever waits there), then 200.
//   release → 422 (the message can never be handled) or 500 (its last delivery failed): a
//             negative acknowledgement; after maxDeliveryAttempts the subscription moves it to
//             the dead-letter topic.
// The receive count is Pub/Sub's deliveryAttempt (present when the subscription dead-letters).
import type { Logger } from "pino";
import { z } from "zod";
import { parseSettings } from "../../core/config-error.ts";
import type { QueueMessage } from "../../clients/queue-message.ts";
import type { Outcome } from "../runtime/outcome.ts";
import type { Runtime } from "../runtime/runtime.ts";
import { DEFAULT_MAX_DEFER_SECONDS, deferralAttributesOf, settleBatch, settlementOf, type Settlement } from "./settle.ts";
import { type Circuits } from "./circuit.ts";
import type { Republish } from "./pubsub-republish.ts";

export interface PushHost {
  runtime: Runtime;
  logger: Logger;
  clock: () => Date;
  circuits: Circuits;
  settings: Pick<PushSettings, "CRDFN_MAX_DELIVERY_ATTEMPTS" | "CRDFN_RETRY_MIN_BACKOFF_SECONDS" | "CRDFN_RETRY_MAX_BACKOFF_SECONDS">;
  /** Publishes a deferred message's copy into its ordering key; absent when no topic is configured. */
  republish?: Republish;
  maxDeferSeconds?: number;
  /** Exports the request's spans before it is answered (Cloud Run may throttle the CPU after); bounded, untraced a no-op. */
  flushTraces?: (timeoutMs: number) => Promise<void>;
}

export interface PushAnswer {
  /** The HTTP status: 200 acknowledges, anything else does not. */
  status: number;
  outcome: Outcome;
  action: Settlement["action"];
}

export const ACK = 200;

export async function answerPush(host: PushHost, message: QueueMessage): Promise<PushAnswer> {
  const log = host.logger;
  // The message judged once, here, before anything else: what follows gets the verified event.
  const delivery = host.runtime.receive(message);
  const settled = await settleBatch([delivery], {
    deliveryOf: (d) => d,
    // One message per request: nothing behind it in this batch to supersede.
    groupOf: () => undefined,
    runtime: host.runtime,
    circuits: host.circuits,
    log,
    policy: (outcome, delivery) =>
      settlementOf(outcome, delivery.message, {
        limit: host.settings.CRDFN_MAX_DELIVERY_ATTEMPTS,
        deferSeconds: () => host.circuits.of(delivery.ok ? delivery.event.cluster : "").deferSeconds(),
        retryBaseSeconds: host.settings.CRDFN_RETRY_MIN_BACKOFF_SECONDS,
        retryMaxSeconds: host.settings.CRDFN_RETRY_MAX_BACKOFF_SECONDS,
        maxDeferSeconds: host.maxDeferSeconds ?? DEFAULT_MAX_DEFER_SECONDS,
        now: host.clock().getTime(),
        log,
      }),
  });
  const { outcome, settlement } = settled.get(delivery)!;
  const answer = (status: number): PushAnswer => ({ status, outcome, action: settlement.action });
  switch (settlement.action) {
    case "delete":
      return answer(ACK);
    case "hold":
      return answer(outcome.result === "unavailable" ? 503 : 500);
    case "release":
      return answer(outcome.result === "dead-letter" ? 422 : 500);
    case "resend": {
      if (!host.republish) {
        log.warn(
          { messageId: message.id },
          "cannot re-send a deferred message (CRDFN_PUBSUB_TOPIC is not set): holding it, so this delivery counts towards the dead-letter limit",
        );
        return answer(503);
      }
      try {
        await host.republish({
          body: message.body,
          ...(message.stream ? { orderingKey: message.stream } : {}),
          attributes: { ...message.attributes, ...deferralAttributesOf(settlement) },
        });
        return answer(ACK);
      } catch (error) {
        log.warn({ messageId: message.id, error: (error as Error).message }, "could not re-send the deferred message; holding it instead");
        return answer(503);
      }
    }
  }
}

// What a function behind a Pub/Sub push subscription needs to know of it, from its environment
// (the generated deployment sets them beside the subscription, so both say the same): its own
// topic (a deferred message's copy goes back there, into its object's ordering key), the
// subscription's dead-letter limit (the delivery a message is dead-lettered after), and its
// retry policy's bounds (how long Pub/Sub waits before a refused message comes again).
const topic = z.string().regex(/^projects\/[^/]+\/topics\/[^/]+$/, "must be a full topic name, projects/<project>/topics/<topic>");
const seconds = z.coerce.number().int().min(0).max(600);

const schema = z.object({
  /** The function's own topic. Unset: a deferral that would spend the last delivery is left to the dead-letter topic. */
  CRDFN_PUBSUB_TOPIC: topic.optional(),
  /** The subscription's deadLetterPolicy.maxDeliveryAttempts (Pub/Sub allows 5–100). */
  CRDFN_MAX_DELIVERY_ATTEMPTS: z.coerce.number().int().min(5).max(100).default(5),
  /** The subscription's retryPolicy bounds, for the log lines that say when a message comes again. */
  CRDFN_RETRY_MIN_BACKOFF_SECONDS: seconds.default(5),
  CRDFN_RETRY_MAX_BACKOFF_SECONDS: seconds.default(600),
  /** The Pub/Sub emulator (local runs); unset on GCP. */
  PUBSUB_EMULATOR_HOST: z.string().min(1).optional(),
  /** Set by Cloud Run itself: logs and metrics then go out as Cloud Logging's structured JSON. */
  K_SERVICE: z.string().min(1).optional(),
});

export type PushSettings = z.infer<typeof schema>;

/** Throws ConfigError, one line naming the setting. */
export function loadPushSettings(env: NodeJS.ProcessEnv): PushSettings {
  return parseSettings(schema, env, "invalid setting ");
}
