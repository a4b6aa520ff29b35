// What a function behind a Pub/Sub push subscription needs to know of it, from its environment
// (the generated deployment sets them beside the subscription, so both say the same): its own
// topic (a deferred message's copy goes back there, into its object's ordering key), the
// subscription's dead-letter limit (the delivery a message is dead-lettered after), and its
// retry policy's bounds (how long Pub/Sub waits before a refused message comes again).
import { z } from "zod";
import { parseSettings } from "../../core/config-error.ts";

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
