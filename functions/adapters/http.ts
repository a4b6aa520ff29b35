// functions-framework handlers (Cloud Run functions, or any HTTP runtime) over the runtime:
//  * HTTP: the request body is one key event; 200 when handled, 503 to ask for redelivery.
//  * CloudEvent: a Pub/Sub message (google.cloud.pubsub.topic.v1.messagePublished), an SQS
//    message (Body/MessageId/MessageAttributes) or a Lambda-style SQS record; throwing makes the
//    framework answer 500, so the push source retries and eventually dead-letters.
import type { CloudEvent, HttpFunction } from "@google-cloud/functions-framework";
import { buildFromEnv, type Served } from "../runtime/entry.ts";
import { fromCloudEvent } from "../../clients/queue-message.ts";
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
    const outcome = await runtime().handle(fromCloudEvent(event));
    if (!messageHandled(outcome)) throw new Error(`${outcome.result}: ${outcome.detail}`);
  };
}
