// The queues crdfn uses, defined once: ElasticMQ's config is generated from this, and an
// existing SQS endpoint gets the same queues created through the API.
import { CreateQueueCommand, GetQueueAttributesCommand, type SQSClient } from "@aws-sdk/client-sqs";
import type { QueueUrls, SqsEnvironment } from "./types.ts";

export const MAX_RECEIVE_COUNT = 5;

export interface QueueDefinition {
  key: keyof QueueUrls;
  name: string;
  fifo: boolean;
  deadLetter?: keyof QueueUrls;
}

/** Dead-letter queues come first: a queue's redrive policy names a queue that must exist. */
export function queueDefinitions(prefix = "crdfn-events"): QueueDefinition[] {
  return [
    { key: "fifoDlq", name: `${prefix}-dlq.fifo`, fifo: true },
    { key: "fifo", name: `${prefix}.fifo`, fifo: true, deadLetter: "fifoDlq" },
  ];
}

/** Default visibility timeout of the local queues; Lambda's event source uses the queue's own. */
export const VISIBILITY_TIMEOUT_SECONDS = 30;

export function elasticMqQueuesConfig(defs: QueueDefinition[]): string {
  const byKey = new Map(defs.map((d) => [d.key, d]));
  const lines = defs.map((d) => {
    const attrs = [`fifo = ${d.fifo}`, `contentBasedDeduplication = false`, `defaultVisibilityTimeout = ${VISIBILITY_TIMEOUT_SECONDS} seconds`];
    if (d.deadLetter) {
      attrs.push(`deadLettersQueue { name = "${byKey.get(d.deadLetter)!.name}", maxReceiveCount = ${MAX_RECEIVE_COUNT} }`);
    }
    return `  "${d.name}" { ${attrs.join(", ")} }`;
  });
  return `queues {\n${lines.join("\n")}\n}`;
}

export function queueUrlsAt(base: string, defs: QueueDefinition[], accountId = "000000000000"): QueueUrls {
  return Object.fromEntries(defs.map((d) => [d.key, `${base}/${accountId}/${d.name}`])) as unknown as QueueUrls;
}

/** Creates the queues on an SQS-compatible endpoint that already runs (CreateQueue is idempotent). */
export async function ensureQueues(sqs: SQSClient, defs: QueueDefinition[]): Promise<QueueUrls> {
  const urls: Partial<QueueUrls> = {};
  for (const d of defs) {
    const attributes: Record<string, string> = { VisibilityTimeout: String(VISIBILITY_TIMEOUT_SECONDS) };
    if (d.fifo) attributes.FifoQueue = "true";
    if (d.deadLetter) {
      const dlqArn = await sqs.send(new GetQueueAttributesCommand({ QueueUrl: urls[d.deadLetter], AttributeNames: ["QueueArn"] }));
      attributes.RedrivePolicy = JSON.stringify({ deadLetterTargetArn: dlqArn.Attributes?.QueueArn, maxReceiveCount: MAX_RECEIVE_COUNT });
    }
    const out = await sqs.send(new CreateQueueCommand({ QueueName: d.name, Attributes: attributes }));
    urls[d.key] = out.QueueUrl!;
  }
  return urls as QueueUrls;
}

/** What `.crdfn/env` says about a queue. */
export function queueEnv(sqs: SqsEnvironment): Record<string, string> {
  return {
    AWS_REGION: sqs.region,
    AWS_ENDPOINT_URL_SQS: sqs.endpoint,
    AWS_ACCESS_KEY_ID: sqs.accessKeyId,
    AWS_SECRET_ACCESS_KEY: sqs.secretAccessKey,
    CRDFN_QUEUE_URL: sqs.queues.fifo,
    CRDFN_DLQ_URL: sqs.queues.fifoDlq,
  };
}
