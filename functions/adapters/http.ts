// functions-framework handlers (Cloud Run functions, or any HTTP runtime) over the runtime:
//  * HTTP: the request body is one key event; 200 when handled, 503 to ask for redelivery.
//  * CloudEvent: a Pub/Sub message (google.cloud.pubsub.topic.v1.messagePublished), an SQS
//    message (Body/MessageId/MessageAttributes) or a Lambda-style SQS record; throwing makes the
//    framework answer 500, so the push source retries and eventually dead-letters.
import type { CloudEvent, HttpFunction } from "@google-cloud/functions-framework";
import { buildFromEnv, type Served } from "../runtime/entry.ts";
import type { QueueMessage } from "../runtime/message.ts";
import { messageHandled } from "../runtime/outcome.ts";
import type { Runtime } from "../runtime/runtime.ts";

export interface HttpDeps {
  runtime?: Runtime;
  env?: NodeJS.ProcessEnv;
}

function lazyRuntime(served: Served, deps: HttpDeps): () => Runtime {
  let runtime = deps.runtime;
  return () => (runtime ??= buildFromEnv(served, deps.env ?? process.env).runtime);
}

export function httpHandler(served: Served, deps: HttpDeps = {}): HttpFunction {
  const runtime = lazyRuntime(served, deps);
  return async (req, res) => {
    const raw = (req as { rawBody?: Buffer }).rawBody;
    const body = raw ? raw.toString("utf8") : typeof req.body === "string" ? req.body : JSON.stringify(req.body);
    const outcome = await runtime().handle({ id: req.get("x-request-id") ?? "http", body });
    res.status(messageHandled(outcome) ? 200 : 503).json({ result: outcome.result, detail: outcome.detail ?? "" });
  };
}

export function cloudEventHandler(served: Served, deps: HttpDeps = {}): (event: CloudEvent<unknown>) => Promise<void> {
  const runtime = lazyRuntime(served, deps);
  return async (event) => {
    const outcome = await runtime().handle(messageOf(event));
    if (!messageHandled(outcome)) throw new Error(`${outcome.result}: ${outcome.detail}`);
  };
}

type Attrs = Record<string, string | { stringValue?: string; StringValue?: string }>;

/** Unwraps the queue message a CloudEvent carries, whichever source delivered it. */
export function messageOf(event: CloudEvent<unknown>): QueueMessage {
  const data = (typeof event.data === "string" ? JSON.parse(event.data) : event.data) as Record<string, unknown> | undefined;
  const pubsub = data?.message as { data?: string; attributes?: Record<string, string>; messageId?: string } | undefined;
  if (pubsub?.data !== undefined) {
    return { id: pubsub.messageId ?? event.id, body: Buffer.from(pubsub.data, "base64").toString("utf8"), attributes: pubsub.attributes ?? {} };
  }
  const body = (data?.Body ?? data?.body) as string | undefined;
  if (typeof body === "string") {
    const attributes: Record<string, string> = {};
    for (const [k, v] of Object.entries(((data?.MessageAttributes ?? data?.messageAttributes) ?? {}) as Attrs)) {
      const value = typeof v === "string" ? v : (v.StringValue ?? v.stringValue);
      if (value !== undefined) attributes[k] = value;
    }
    const system = (data?.Attributes ?? data?.attributes) as Record<string, string> | undefined;
    return { id: ((data?.MessageId ?? data?.messageId) as string | undefined) ?? event.id, body, attributes, receiveCount: Number(system?.ApproximateReceiveCount ?? "1") };
  }
  // The event itself is the key event (e.g. a direct CloudEvent from an EventBridge pipe).
  return { id: event.id, body: JSON.stringify(data ?? null) };
}
