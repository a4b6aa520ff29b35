// Queue (queues.example.com/v1): an SQS queue per object, kept outside the cluster by the
// function's own AWS identity — created in ElasticMQ under `crdfn dev`, in SQS on Lambda — with
// its URL and ARN in status and in a ConfigMap the object's applications can mount. A queue
// deleted by hand comes back at the next tick of the timer; deleting the object deletes it.
import {
  CreateQueueCommand,
  DeleteQueueCommand,
  GetQueueAttributesCommand,
  GetQueueUrlCommand,
  QueueDeletedRecently,
  QueueDoesNotExist,
  QueueNameExists,
  SetQueueAttributesCommand,
  SQSClient,
} from "@aws-sdk/client-sqs";
import { defineOperator, TemporaryError, type CustomObject } from "crdfn";
import { z } from "zod";

/** Every queue this operator manages is named so; its function's IAM role may touch no other. */
export const QUEUE_PREFIX = "crdfn-queue-";
export const FINALIZER = "queues.example.com/delete-queue";

export const queueSpec = z.object({
  visibilityTimeoutSeconds: z.number().int().min(0).max(43_200).default(30).describe("How long a received message stays hidden."),
  messageRetentionSeconds: z.number().int().min(60).max(1_209_600).default(345_600).describe("How long a message is kept (4 days by default)."),
});
export type QueueSpec = z.infer<typeof queueSpec>;

export const queueStatus = z.object({
  url: z.string().optional().describe("The queue's URL."),
  arn: z.string().optional().describe("The queue's ARN."),
});

/**
 * The queue's name: readable (namespace and name) and the object's own (its uid), within SQS's
 * 80 characters. It is what makes a retry safe: CreateQueue of an existing name with the same
 * attributes returns it, so running effects again finds the queue instead of making another.
 */
export function queueName(queue: { metadata: { namespace?: string | undefined; name: string; uid: string } }): string {
  const id = queue.metadata.uid.replace(/-/g, "").slice(0, 12);
  const readable = `${queue.metadata.namespace ?? "cluster"}-${queue.metadata.name}`.replace(/[^A-Za-z0-9_-]/g, "_");
  return `${QUEUE_PREFIX}${readable.slice(0, 80 - QUEUE_PREFIX.length - id.length - 1)}-${id}`;
}

export const attributesOf = (spec: QueueSpec): Record<string, string> => ({
  VisibilityTimeout: String(spec.visibilityTimeoutSeconds),
  MessageRetentionPeriod: String(spec.messageRetentionSeconds),
});

/**
 * An SQS client for the function's environment: its region, its endpoint (ElasticMQ under
 * `crdfn dev`; unset on AWS) and its credentials (on Lambda, its role's).
 */
function sqsFor(env: Readonly<Record<string, string | undefined>>): SQSClient {
  const {
    AWS_REGION: region,
    AWS_ENDPOINT_URL_SQS: endpoint,
    AWS_ACCESS_KEY_ID: accessKeyId,
    AWS_SECRET_ACCESS_KEY: secretAccessKey,
    AWS_SESSION_TOKEN: sessionToken,
  } = env;
  return new SQSClient({
    ...(region ? { region } : {}),
    ...(endpoint ? { endpoint } : {}),
    ...(accessKeyId && secretAccessKey ? { credentials: { accessKeyId, secretAccessKey, ...(sessionToken ? { sessionToken } : {}) } } : {}),
  });
}

/** The queue's URL, or undefined when there is no queue of that name. */
async function urlOf(sqs: SQSClient, name: string): Promise<string | undefined> {
  try {
    return (await sqs.send(new GetQueueUrlCommand({ QueueName: name }))).QueueUrl;
  } catch (e) {
    if (e instanceof QueueDoesNotExist) return undefined;
    throw e;
  }
}

/** Finds the object's queue or creates it, then gives it the spec's attributes. */
async function ensureQueue(sqs: SQSClient, queue: CustomObject<QueueSpec>): Promise<{ url: string; arn: string }> {
  const name = queueName(queue);
  const attributes = attributesOf(queue.spec);
  let url = await urlOf(sqs, name);
  if (url === undefined) {
    try {
      url = (await sqs.send(new CreateQueueCommand({ QueueName: name, Attributes: attributes, tags: { "crdfn.io/uid": queue.metadata.uid } }))).QueueUrl;
    } catch (e) {
      // SQS keeps a deleted queue's name for 60 s.
      if (e instanceof QueueDeletedRecently)
        throw new TemporaryError(`SQS allows the name ${name} again 60 s after the queue was deleted`, 65, "QueueDeletedRecently");
      // Made meanwhile (with other attributes): found below, and given the spec's.
      if (!(e instanceof QueueNameExists)) throw e;
      url = await urlOf(sqs, name);
    }
  }
  if (url === undefined) throw new Error(`queue ${name}: no URL`);
  const current: Record<string, string | undefined> =
    (await sqs.send(new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ["All"] }))).Attributes ?? {};
  if (Object.entries(attributes).some(([key, value]) => current[key] !== value))
    await sqs.send(new SetQueueAttributesCommand({ QueueUrl: url, Attributes: attributes }));
  return { url, arn: current.QueueArn ?? "" };
}

export const configMapName = (queue: string): string => `${queue}-queue`;

export default defineOperator({
  resource: {
    group: "queues.example.com",
    version: "v1",
    plural: "queues",
    kind: "Queue",
    // crdfn adds Ready, Age and (-o wide) Reason, Attempts and Next.
    printerColumns: [{ name: "URL", type: "string", jsonPath: ".status.url" }],
  },
  spec: queueSpec,
  status: queueStatus,
  owns: [{ group: "", version: "v1", kind: "ConfigMap" }],
  finalizer: FINALIZER,
  // What notices a queue deleted by hand: no event in the cluster says so.
  every: 30,
  // The function's role may manage these queues and no others (crdfn generate writes it into the role).
  cloud: {
    aws: [
      {
        actions: ["sqs:CreateQueue", "sqs:TagQueue", "sqs:GetQueueUrl", "sqs:GetQueueAttributes", "sqs:SetQueueAttributes", "sqs:DeleteQueue"],
        resources: [`arn:\${AWS::Partition}:sqs:\${AWS::Region}:\${AWS::AccountId}:${QUEUE_PREFIX}*`],
      },
    ],
  },
  // External I/O, safe to run again: the name is the object's, so a redelivery finds the queue a
  // killed run made. (An API with client tokens would take ctx.idempotencyKey instead.)
  async effects(queue, ctx) {
    const sqs = sqsFor(ctx.env);
    try {
      return { status: await ensureQueue(sqs, queue) };
    } finally {
      sqs.destroy();
    }
  },
  // Pure: what effects recorded is in the status already.
  reconcile(queue) {
    const { url, arn } = queue.status ?? {};
    if (typeof url !== "string" || typeof arn !== "string") return {};
    return {
      children: [{ apiVersion: "v1", kind: "ConfigMap", metadata: { name: configMapName(queue.metadata.name) }, data: { url, arn } }],
    };
  },
  // By name, not by the recorded URL: a queue made by a run killed before it recorded the URL goes too.
  async finalize(queue, ctx) {
    const sqs = sqsFor(ctx.env);
    try {
      const url = await urlOf(sqs, queueName(queue));
      if (url !== undefined) {
        try {
          await sqs.send(new DeleteQueueCommand({ QueueUrl: url }));
        } catch (e) {
          if (!(e instanceof QueueDoesNotExist)) throw e;
        }
      }
      return { done: true };
    } finally {
      sqs.destroy();
    }
  },
});
