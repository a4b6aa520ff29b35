// What the adapters need to know of a queue they consume, asked of SQS once per queue: its
// redrive policy's maxReceiveCount (the receive a message is dead-lettered after) and its
// visibility timeout (how long a received message stays hidden while it is handled).
import type { SqsClientSource } from "../runtime/sqs-client.ts";

export interface QueueFacts {
  maxReceiveCount?: number;
  visibilitySeconds?: number;
}

/** Read once per queue; a failed read is tried again on the next call. */
export function queueFacts(sqs: SqsClientSource): (queueUrl: string) => Promise<QueueFacts> {
  const known = new Map<string, Promise<QueueFacts>>();
  return (queueUrl) => {
    let facts = known.get(queueUrl);
    if (!facts) {
      facts = sqs()
        .then(({ client, sdk }) =>
          client.send(new sdk.GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: ["RedrivePolicy", "VisibilityTimeout"] })),
        )
        .then((out): QueueFacts => {
          const policy = out.Attributes?.RedrivePolicy;
          const maxReceiveCount = policy ? Number((JSON.parse(policy) as { maxReceiveCount?: unknown }).maxReceiveCount) || undefined : undefined;
          const visibilitySeconds = Number(out.Attributes?.VisibilityTimeout) || undefined;
          return { ...(maxReceiveCount ? { maxReceiveCount } : {}), ...(visibilitySeconds ? { visibilitySeconds } : {}) };
        })
        .catch((): QueueFacts => {
          known.delete(queueUrl);
          return {};
        });
      known.set(queueUrl, facts);
    }
    return facts;
  };
}
