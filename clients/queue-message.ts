// A queue message as the runtime takes it, from each shape a queue delivers one in: the SQS
// SDK's Message (the local poller, `crdfn dlq`), a Lambda SQSRecord, and a CloudEvent carrying
// a Pub/Sub message, an SQS message in either spelling, or the key event itself.
import type { Message } from "@aws-sdk/client-sqs";
import type { CloudEvent } from "@google-cloud/functions-framework";
import type { SQSRecord } from "aws-lambda";

export interface QueueMessage {
  id: string;
  body: string;
  /** String message attributes (the requeue due time travels here, outside the contract body). */
  attributes?: Record<string, string>;
  /** ApproximateReceiveCount, when the source reports it. */
  receiveCount?: number;
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

export function fromSqsMessage(m: Message): QueueMessage {
  return { id: m.MessageId ?? "", body: m.Body ?? "", attributes: stringAttributes(m.MessageAttributes), receiveCount: receiveCountOf(m.Attributes) };
}

export function fromLambdaRecord(record: SQSRecord): QueueMessage {
  return { id: record.messageId, body: record.body, attributes: stringAttributes(record.messageAttributes), receiveCount: receiveCountOf(record.attributes) };
}

/** Unwraps the queue message a CloudEvent carries, whichever source delivered it. */
export function fromCloudEvent(event: CloudEvent<unknown>): QueueMessage {
  const data = (typeof event.data === "string" ? JSON.parse(event.data) : event.data) as Record<string, unknown> | undefined;
  const pubsub = data?.message as { data?: string; attributes?: Record<string, string>; messageId?: string } | undefined;
  if (pubsub?.data !== undefined) {
    return { id: pubsub.messageId ?? event.id, body: Buffer.from(pubsub.data, "base64").toString("utf8"), attributes: pubsub.attributes ?? {} };
  }
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
