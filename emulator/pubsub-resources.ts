// The Pub/Sub resources of one crdfn environment, as the GCP deployment has them: an event
// topic, a dead-letter topic, an ordered subscription that dead-letters after a number of
// delivery attempts and retries with backoff, and a pull subscription on the dead-letter topic
// (Pub/Sub drops what reaches a topic without a subscription) to inspect what was given up.
import type { PubSub } from "@google-cloud/pubsub";
import { z } from "zod";
import { zodLine } from "../core/config-error.ts";
import { SetupError } from "./errors.ts";

const seconds = z.number().int().min(0).max(600);
const ResourceOptions = z.object({
  // Pub/Sub ids start with a letter and use [A-Za-z0-9-_.~+%]; the suffixes below are valid.
  prefix: z.string().regex(/^[A-Za-z][A-Za-z0-9._~+%-]{0,200}$/, "starts with a letter, then letters, digits or -_.~+%"),
  pushEndpoint: z.url().optional(),
  /** Pub/Sub's bounds: 10 to 600 s. For push it is also the request timeout. */
  ackDeadlineSeconds: z.number().int().min(10).max(600).default(60),
  /** Pub/Sub's bounds: 5 to 100. */
  maxDeliveryAttempts: z.number().int().min(5).max(100).default(5),
  minimumBackoffSeconds: seconds.default(1),
  maximumBackoffSeconds: seconds.default(10),
});
export type PubSubResourceOptions = z.input<typeof ResourceOptions>;

/** Full resource names (projects/…/topics/…, projects/…/subscriptions/…). */
export interface PubSubResources {
  topic: string;
  deadLetterTopic: string;
  /** Ordered, dead-lettering subscription of `topic`: the one a push deliverer serves. */
  subscription: string;
  /** Pull subscription of `deadLetterTopic`. */
  deadLetterSubscription: string;
}

const ALREADY_EXISTS = 6;
const tolerateExisting = (e: unknown): void => {
  if ((e as { code?: number }).code !== ALREADY_EXISTS) throw e;
};

/**
 * Creates (or finds, if they exist) `<prefix>events` and `<prefix>events-dead-letter`, the
 * ordered subscription `<prefix>events` and the pull subscription `<prefix>events-dead-letter`.
 */
export async function createPubSubResources(pubsub: PubSub, options: PubSubResourceOptions): Promise<PubSubResources> {
  const parsed = ResourceOptions.safeParse(options);
  if (!parsed.success) throw new SetupError(`Pub/Sub resources: ${zodLine(parsed.error, { first: true, root: "options" })}`);
  const o = parsed.data;
  if (o.minimumBackoffSeconds > o.maximumBackoffSeconds) {
    throw new SetupError(`Pub/Sub resources: minimumBackoffSeconds (${o.minimumBackoffSeconds}) exceeds maximumBackoffSeconds (${o.maximumBackoffSeconds})`);
  }
  const topic = pubsub.topic(`${o.prefix}events`);
  const deadLetterTopic = pubsub.topic(`${o.prefix}events-dead-letter`);
  await topic.create().catch(tolerateExisting);
  await deadLetterTopic.create().catch(tolerateExisting);
  const subscription = topic.subscription(`${o.prefix}events`);
  await topic
    .createSubscription(subscription.name, {
      enableMessageOrdering: true,
      ackDeadlineSeconds: o.ackDeadlineSeconds,
      deadLetterPolicy: { deadLetterTopic: deadLetterTopic.name, maxDeliveryAttempts: o.maxDeliveryAttempts },
      retryPolicy: { minimumBackoff: { seconds: o.minimumBackoffSeconds }, maximumBackoff: { seconds: o.maximumBackoffSeconds } },
      ...(o.pushEndpoint ? { pushEndpoint: o.pushEndpoint } : {}),
    })
    .catch(tolerateExisting);
  const deadLetterSubscription = deadLetterTopic.subscription(`${o.prefix}events-dead-letter`);
  await deadLetterTopic.createSubscription(deadLetterSubscription.name, { ackDeadlineSeconds: o.ackDeadlineSeconds }).catch(tolerateExisting);
  return {
    topic: topic.name,
    deadLetterTopic: deadLetterTopic.name,
    subscription: subscription.name,
    deadLetterSubscription: deadLetterSubscription.name,
  };
}
