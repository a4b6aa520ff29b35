// A queue message as the runtime takes it, from each shape a queue delivers one in: the SQS
// SDK's Message (the local poller, `crdfn dlq`), a Lambda SQSRecord, a Pub/Sub push request's
// body (a Cloud Run function behind a push subscription), and a CloudEvent carrying a Pub/Sub
// message (Eventarc), an SQS message in either spelling, or the key event itself.
import type { Message } from "@aws-sdk/client-sqs";
import type { CloudEvent } from "@google-cloud/functions-framework";
import type { SQSRecord } from "aws-lambda";
import { z } from "zod";

export interface QueueMessage {
  id: string;
  body: string;
  /** String message attributes (the requeue due time travels here, outside the contract body). */
  attributes?: Record<string, string>;
  /** ApproximateReceiveCount (SQS), deliveryAttempt (Pub/Sub), when the source reports it. */
  receiveCount?: number;
  /** The ordered stream it came on, when the source says (a Pub/Sub ordering key): a copy re-sent into it goes behind what waits there. */
  stream?: string;
  /** When the queue took it (epoch ms, the queue's own clock: SQS SentTimestamp, Pub/Sub publishTime): where its time in the queue starts. */
  sentAt?: number;
  /** Which queue it came from, as OpenTelemetry's messaging.system names it. */
  system?: "aws_sqs" | "gcp_pubsub";
}

/** A message attribute as the SDK (StringValue), a Lambda record (stringValue) or a plain map spells it. */
type AttributeValue = string | { StringValue?: string; stringValue?: string };

/** The string-valued message attributes; binary ones carry nothing the runtime reads. */
function stringAttributes(attributes: Record<string, AttributeValue> | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(attributes ?? {})) {
    const value = typeof v === "string" ? v : (v.StringValue ?? v.stringValue);
    if (value !== undefined) out[k] = value;
  }
  return out;
}

/** A source that does not say is delivering for the first time. */
const receiveCountOf = (system: { ApproximateReceiveCount?: string } | undefined): number => Number(system?.ApproximateReceiveCount ?? "1");

/** SentTimestamp (epoch ms as text) or an RFC 3339 publishTime, when the source gave one that reads as a time. */
function sentAtOf(value: string | undefined, system: NonNullable<QueueMessage["system"]>): Pick<QueueMessage, "sentAt" | "system"> {
  if (value === undefined || value === "") return {};
  const at = /^\d+$/.test(value) ? Number(value) : Date.parse(value);
  // A source that fills in 0 for a time it does not know (a test's event) says nothing.
  return Number.isFinite(at) && at > 0 ? { sentAt: at, system } : {};
}

export function fromSqsMessage(m: Message): QueueMessage {
  return {
    id: m.MessageId ?? "",
    body: m.Body ?? "",
    attributes: stringAttributes(m.MessageAttributes),
    receiveCount: receiveCountOf(m.Attributes),
    ...sentAtOf(m.Attributes?.SentTimestamp, "aws_sqs"),
  };
}

export function fromLambdaRecord(record: SQSRecord): QueueMessage {
  return {
    id: record.messageId,
    body: record.body,
    attributes: stringAttributes(record.messageAttributes),
    receiveCount: receiveCountOf(record.attributes),
    ...sentAtOf(record.attributes?.SentTimestamp, "aws_sqs"),
  };
}

/**
 * What Pub/Sub push POSTs for one message (docs.cloud.google.com/pubsub/docs/push): the message
 * (data base64, attributes, both spellings of its id, the ordering key when it has one), the
 * subscription, and `deliveryAttempt` when the subscription has a dead-letter policy. Eventarc's
 * messagePublished CloudEvent carries the same object as its data.
 */
export const pushBodySchema = z.looseObject({
  message: z.looseObject({
    data: z.base64().optional(),
    attributes: z.record(z.string(), z.string()).nullish(),
    messageId: z.string().optional(),
    message_id: z.string().optional(),
    orderingKey: z.string().optional(),
    publishTime: z.string().optional(),
    publish_time: z.string().optional(),
  }),
  subscription: z.string().optional(),
  deliveryAttempt: z.number().int().positive().optional(),
});
export type PushBody = z.infer<typeof pushBodySchema>;

/** A push body → the queue message; `undefined` when the value is no push body (a direct key event, say). */
export function fromPushBody(value: unknown, fallbackId = ""): QueueMessage | undefined {
  const parsed = pushBodySchema.safeParse(value);
  if (!parsed.success) return undefined;
  const { message, deliveryAttempt } = parsed.data;
  return {
    id: message.messageId ?? message.message_id ?? fallbackId,
    body: Buffer.from(message.data ?? "", "base64").toString("utf8"),
    attributes: message.attributes ?? {},
    ...(deliveryAttempt === undefined ? {} : { receiveCount: deliveryAttempt }),
    ...(message.orderingKey ? { stream: message.orderingKey } : {}),
    ...sentAtOf(message.publishTime ?? message.publish_time, "gcp_pubsub"),
  };
}

/** Unwraps the queue message a CloudEvent carries, whichever source delivered it. */
export function fromCloudEvent(event: CloudEvent<unknown>): QueueMessage {
  const data = (typeof event.data === "string" ? JSON.parse(event.data) : event.data) as Record<string, unknown> | undefined;
  const pushed = (data?.message as { data?: unknown } | undefined)?.data !== undefined ? fromPushBody(data, event.id) : undefined;
  if (pushed) return pushed;
  // An SQS message as the API spells it (Body, MessageId…) or as a Lambda record does (body, messageId…).
  const body = data?.Body ?? data?.body;
  if (typeof body === "string") {
    return {
      id: ((data?.MessageId ?? data?.messageId) as string | undefined) ?? event.id,
      body,
      attributes: stringAttributes((data?.MessageAttributes ?? data?.messageAttributes) as Record<string, AttributeValue> | undefined),
      receiveCount: receiveCountOf((data?.Attributes ?? data?.attributes) as { ApproximateReceiveCount?: string } | undefined),
    };
  }
  // The event itself is the key event (e.g. a direct CloudEvent from an EventBridge pipe).
  return { id: event.id, body: JSON.stringify(data ?? null) };
}
