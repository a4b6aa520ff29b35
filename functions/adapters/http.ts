// functions-framework handlers (Cloud Run functions, or any HTTP runtime) over the runtime:
//  * HTTP: the request body is one key event; 200 when handled, 503 to ask for redelivery.
//  * CloudEvent: a Pub/Sub message (google.cloud.pubsub.topic.v1.messagePublished), an SQS
//    message (Body/MessageId/MessageAttributes) or a Lambda-style SQS record; throwing makes the
//    framework answer 500, so the push source retries and eventually dead-letters.
// An outage of the API server ("unavailable") is answered 503 like any message that must come
// back: the push source redelivers it with its retry policy's backoff.
import type { CloudEvent, HttpFunction } from "@google-cloud/functions-framework";
import { buildFromEnv, type Built, type Served } from "../runtime/entry.ts";
import { fromCloudEvent, type QueueMessage } from "../../clients/queue-message.ts";
import { messageHandled, type Outcome } from "../runtime/outcome.ts";
import type { Runtime } from "../runtime/runtime.ts";

export interface HttpDeps {
  runtime?: Runtime;
  env?: NodeJS.ProcessEnv;
}

type Host = Pick<Built, "runtime">;

/** Handles the message: handled, or to be delivered again. */
function lazyHandle(served: Served, deps: HttpDeps): (m: QueueMessage) => Promise<Outcome & { handled: boolean }> {
  let host: Host | undefined = deps.runtime ? { runtime: deps.runtime } : undefined;
  return async (m) => {
    const h = (host ??= buildFromEnv(served, deps.env ?? process.env));
    const outcome = await h.runtime.handle(m);
    return { ...outcome, handled: messageHandled(outcome) };
  };
}

export function httpHandler(served: Served, deps: HttpDeps = {}): HttpFunction {
  const handle = lazyHandle(served, deps);
  return async (req, res) => {
    const raw = (req as { rawBody?: Buffer }).rawBody;
    const body = raw ? raw.toString("utf8") : typeof req.body === "string" ? req.body : JSON.stringify(req.body);
    const outcome = await handle({ id: req.get("x-request-id") ?? "http", body });
    res.status(outcome.handled ? 200 : 503).json({ result: outcome.result, detail: outcome.detail ?? "" });
  };
}

export function cloudEventHandler(served: Served, deps: HttpDeps = {}): (event: CloudEvent<unknown>) => Promise<void> {
  const handle = lazyHandle(served, deps);
  return async (event) => {
    const outcome = await handle(fromCloudEvent(event));
    if (!outcome.handled) throw new Error(`${outcome.result}: ${outcome.detail}`);
  };
}
