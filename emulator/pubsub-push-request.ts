// What Pub/Sub push delivery sends and how it reads the answer, for the local push deliverer:
// the wrapped push body, the CloudEvent Eventarc makes of it for a Cloud Run function, which
// status codes acknowledge, and how long the retry policy waits before the next attempt.
import type { protos } from "@google-cloud/pubsub";

type ReceivedMessage = protos.google.pubsub.v1.IReceivedMessage;
type Duration = protos.google.protobuf.IDuration | null | undefined;

/** Push acknowledges with these codes; anything else (or no answer) is a negative acknowledgement. */
export const ACK_STATUSES: ReadonlySet<number> = new Set([102, 200, 201, 202, 204]);

/** The two ways a function is invoked by push. */
export type PushFormat =
  /** The wrapped push request: what an HTTP function (or any webhook) receives. */
  | "push"
  /**
   * A binary-mode CloudEvent of type google.cloud.pubsub.topic.v1.messagePublished whose data is
   * the push request, as Eventarc delivers a Pub/Sub trigger to a Cloud Run function.
   */
  | "cloudevent";

export const MESSAGE_PUBLISHED = "google.cloud.pubsub.topic.v1.messagePublished";

const secondsOf = (d: Duration): number => Number(String(d?.seconds ?? 0)) + (d?.nanos ?? 0) / 1e9;

function rfc3339(t: protos.google.protobuf.ITimestamp | null | undefined): string {
  return new Date(Number(String(t?.seconds ?? 0)) * 1000 + Math.floor((t?.nanos ?? 0) / 1e6)).toISOString();
}

export interface PushRequest {
  headers: Record<string, string>;
  body: string;
}

/**
 * The request push makes for one received message: the push JSON (the message with both
 * spellings of its id and publish time, as Pub/Sub sends them, and `deliveryAttempt` when the
 * subscription dead-letters), bare or as a CloudEvent about `topic`.
 */
export function pushRequest(rm: ReceivedMessage, subscription: string, topic: string, format: PushFormat): PushRequest {
  const m = rm.message ?? {};
  const data = typeof m.data === "string" ? m.data : Buffer.from(m.data ?? new Uint8Array()).toString("base64");
  const publishTime = rfc3339(m.publishTime);
  const messageId = m.messageId ?? "";
  const push = {
    message: {
      data,
      attributes: m.attributes ?? {},
      messageId,
      message_id: messageId,
      publishTime,
      publish_time: publishTime,
      ...(m.orderingKey ? { orderingKey: m.orderingKey } : {}),
    },
    subscription,
    ...(rm.deliveryAttempt ? { deliveryAttempt: rm.deliveryAttempt } : {}),
  };
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (format === "cloudevent") {
    Object.assign(headers, {
      "ce-specversion": "1.0",
      "ce-id": messageId,
      "ce-source": `//pubsub.googleapis.com/${topic}`,
      "ce-type": MESSAGE_PUBLISHED,
      "ce-time": publishTime,
    });
  }
  return { headers, body: JSON.stringify(push) };
}

export interface RetryPolicy {
  minimumBackoffSeconds: number;
  maximumBackoffSeconds: number;
}

/** The subscription's retry policy in seconds, or undefined when it has none (redeliver at once). */
export function retryPolicyOf(sub: protos.google.pubsub.v1.ISubscription): RetryPolicy | undefined {
  const p = sub.retryPolicy;
  if (!p) return undefined;
  // Pub/Sub's defaults for a policy that leaves a bound out.
  return {
    minimumBackoffSeconds: p.minimumBackoff ? secondsOf(p.minimumBackoff) : 10,
    maximumBackoffSeconds: p.maximumBackoff ? secondsOf(p.maximumBackoff) : 600,
  };
}

/**
 * Seconds to wait before delivering a refused message again, after its `attempt`-th delivery
 * (1-based): exponential from the minimum backoff, doubling per attempt, capped at the maximum.
 * Pub/Sub documents the policy as exponential between the two bounds, on a best-effort basis.
 */
export function retryDelaySeconds(policy: RetryPolicy | undefined, attempt: number): number {
  if (!policy) return 0;
  const exp = policy.minimumBackoffSeconds * 2 ** Math.max(0, attempt - 1);
  return Math.min(policy.maximumBackoffSeconds, exp);
}
