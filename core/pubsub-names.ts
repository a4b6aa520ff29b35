// The Pub/Sub resources of one operator's function, named once for every place that names them:
// the generated GCP deployment (core/gcp-resources.ts), the bridge's settings, `crdfn dev` on the
// Cloud Run path and `crdfn status` / `crdfn dlq`. With the prefix `crdfn-shop-`, the Greeting
// function's are the topic and push subscription `crdfn-shop-greeting-events` and the topic and
// pull subscription `crdfn-shop-greeting-events-dead-letter` (emulator/pubsub-resources.ts creates
// the same from the prefix `crdfn-shop-greeting-`).

export interface PubSubNames {
  /** Full names: projects/<project>/topics/… and projects/<project>/subscriptions/…. */
  topic: string;
  deadLetterTopic: string;
  /** The ordered push subscription that delivers to the function. */
  subscription: string;
  /** The pull subscription that keeps what the dead-letter topic receives (`crdfn dlq`). */
  deadLetterSubscription: string;
}

/** The ids (the last part of the names), for the resources' own `name` fields. */
export function pubSubIdsOf(prefix: string, operatorName: string): { events: string; deadLetters: string } {
  return { events: `${prefix}${operatorName}-events`, deadLetters: `${prefix}${operatorName}-events-dead-letter` };
}

export function pubSubNamesOf(project: string, prefix: string, operatorName: string): PubSubNames {
  const ids = pubSubIdsOf(prefix, operatorName);
  return {
    topic: `projects/${project}/topics/${ids.events}`,
    deadLetterTopic: `projects/${project}/topics/${ids.deadLetters}`,
    subscription: `projects/${project}/subscriptions/${ids.events}`,
    deadLetterSubscription: `projects/${project}/subscriptions/${ids.deadLetters}`,
  };
}
