// The queues of one operator's function, named once for every place that names them: the
// generated deploy files (serverless.ts, gcp.ts), the bridge's settings, `crdfn dev`, and
// `crdfn status` / `crdfn dlq`.
//  * SQS (Lambda): <prefix><operator>.fifo and its dead-letter queue <prefix><operator>-dlq.fifo.
//  * Pub/Sub (Cloud Run): with the prefix `crdfn-shop-`, the Greeting function's topic and push
//    subscription are `crdfn-shop-greeting-events`, its dead-letter topic and pull subscription
//    `crdfn-shop-greeting-events-dead-letter` (emulator/pubsub-resources.ts creates the same from
//    the prefix `crdfn-shop-greeting-`).
import type { Operator } from "../core/operator.ts";
import type { QueueSettings } from "./settings.ts";
import { operatorName } from "./rbac.ts";

/** The event queue (FIFO) of an operator's function. */
export const eventQueueName = (operator: Operator<unknown>, s: { queues: QueueSettings }): string => `${s.queues.prefix}${operatorName(operator)}.fifo`;
export const eventQueueUrl = (operator: Operator<unknown>, s: { queues: QueueSettings }): string => `${s.queues.urlBase}/${eventQueueName(operator, s)}`;
/** Its dead-letter queue. */
export const deadLetterQueueName = (operator: Operator<unknown>, s: { queues: QueueSettings }): string =>
  `${s.queues.prefix}${operatorName(operator)}-dlq.fifo`;
export const deadLetterQueueUrl = (operator: Operator<unknown>, s: { queues: QueueSettings }): string =>
  `${s.queues.urlBase}/${deadLetterQueueName(operator, s)}`;

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
