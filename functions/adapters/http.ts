// functions-framework handlers over the runtime: a Cloud Run function behind a Pub/Sub push
// subscription (ordered, dead-lettering: deploy/gcp.ts generates it), or any HTTP runtime.
//  * HTTP (`httpHandler`): a Pub/Sub push request is settled as push.ts says (200 acknowledges;
//    anything else is a negative acknowledgement, retried with the subscription's backoff and
//    dead-lettered after its maxDeliveryAttempts). A request whose body is a key event itself
//    (no queue behind it) gets 200 when handled, 503 to ask for it again.
//  * CloudEvent (`cloudEventHandler`): Eventarc's messagePublished event (its data is the push
//    body), an SQS message or a key event; throwing answers 500, a negative acknowledgement.
// Built from the environment on the first request (a bad setting is one line in the log and
// every request refused, so the subscription keeps the messages), and kept for warm requests:
// the runtime, a circuit per cluster (an API server outage defers work instead of spending
// deliveries), and on Cloud Run (K_SERVICE) Cloud Logging's structured logs and metrics.
// Traced (OTEL_EXPORTER_OTLP_ENDPOINT), each request's spans are exported before it is answered:
// Cloud Run may take the instance's CPU away once it has.
import type { CloudEvent, HttpFunction } from "@google-cloud/functions-framework";
import { pino, type Logger } from "pino";
import { ConfigError } from "../../core/config-error.ts";
import { fromCloudEvent, fromPushBody } from "../../clients/queue-message.ts";
import { buildFromEnv, TRACE_FLUSH_MS, type Served } from "../runtime/entry.ts";
import type { Tracing } from "../../clients/tracing.ts";
import type { RuntimeMetrics } from "../runtime/metrics.ts";
import { messageHandled } from "../runtime/outcome.ts";
import { handleMessage, type Runtime } from "../runtime/runtime.ts";
import { cloudLoggingLogger, cloudLoggingMetrics } from "./cloud-logging.ts";
import { createCircuits } from "./circuit.ts";
import { answerPush, loadPushSettings, type PushHost } from "./push.ts";
import { pubSubRepublisher, type Republish } from "./pubsub-republish.ts";

export interface HttpDeps {
  /** Supplied by tests and `crdfn dev`; otherwise built from the environment on the first request. */
  runtime?: Runtime;
  env?: NodeJS.ProcessEnv;
  logger?: Logger;
  clock?: () => Date;
  /** Re-sends a deferred message into its ordering key; default: to CRDFN_PUBSUB_TOPIC. */
  republish?: Republish;
  /** Metrics of each cluster's runtimes; default: Cloud Logging lines on Cloud Run, none elsewhere. */
  metrics?: (cluster: string) => RuntimeMetrics;
  /** A message deferred for an outage longer than this is left to the dead-letter topic. Default 6 h. */
  maxDeferSeconds?: number;
  /** With `runtime`: the tracing flushed before each answer (built from the environment otherwise). */
  tracing?: Tracing;
}

function hostOf(served: Served, deps: HttpDeps): PushHost {
  const env = deps.env ?? process.env;
  const settings = loadPushSettings(env);
  const onCloudRun = settings.K_SERVICE !== undefined;
  const clock = deps.clock ?? (() => new Date());
  let runtime = deps.runtime;
  let logger = deps.logger;
  let flushTraces: PushHost["flushTraces"] = deps.tracing ? (timeoutMs) => deps.tracing!.flush(timeoutMs) : undefined;
  if (!runtime) {
    const metrics = deps.metrics ?? (onCloudRun ? (cluster: string) => cloudLoggingMetrics(cluster, (line) => process.stdout.write(line)) : undefined);
    const built = buildFromEnv(served, env, {
      ...(metrics ? { metrics } : {}),
      ...(onCloudRun && !logger ? { logger: cloudLoggingLogger(env.LOG_LEVEL ?? "info") } : logger ? { logger } : {}),
    });
    runtime = built.runtime;
    logger ??= built.logger;
    flushTraces = built.flushTraces;
  }
  logger ??= pino({ level: "silent" });
  const republish =
    deps.republish ??
    (settings.CRDFN_PUBSUB_TOPIC
      ? pubSubRepublisher({ topic: settings.CRDFN_PUBSUB_TOPIC, ...(settings.PUBSUB_EMULATOR_HOST ? { emulatorHost: settings.PUBSUB_EMULATOR_HOST } : {}) })
      : undefined);
  return {
    runtime,
    logger,
    clock,
    circuits: createCircuits({ clock, logger }),
    settings,
    ...(republish ? { republish } : {}),
    ...(deps.maxDeferSeconds === undefined ? {} : { maxDeferSeconds: deps.maxDeferSeconds }),
    ...(flushTraces ? { flushTraces } : {}),
  };
}

/** The host, built once; a bad setting is said once and refuses every request (the subscription keeps them). */
function lazyHost(served: Served, deps: HttpDeps): () => PushHost | ConfigError {
  let host: PushHost | ConfigError | undefined;
  return () => {
    if (host) return host;
    try {
      host = hostOf(served, deps);
    } catch (error) {
      if (!(error instanceof ConfigError)) throw error;
      console.error(error.message);
      host = error;
    }
    return host;
  };
}

const bodyOf = (req: Parameters<HttpFunction>[0]): string => {
  const raw = (req as { rawBody?: Buffer }).rawBody;
  return raw ? raw.toString("utf8") : typeof req.body === "string" ? req.body : JSON.stringify(req.body ?? null);
};

const parseJson = (text: string): unknown => {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
};

export function httpHandler(served: Served, deps: HttpDeps = {}): HttpFunction {
  const host = lazyHost(served, deps);
  return async (req, res) => {
    const h = host();
    if (h instanceof ConfigError) {
      res.status(500).json({ result: "misconfigured", detail: h.message });
      return;
    }
    const body = bodyOf(req);
    const pushed = fromPushBody(parseJson(body), req.get("x-request-id") ?? "");
    if (pushed) {
      const a = await answerPush(h, pushed);
      await h.flushTraces?.(TRACE_FLUSH_MS);
      res.status(a.status).json({ result: a.outcome.result, action: a.action, detail: a.outcome.detail ?? "" });
      return;
    }
    // A key event POSTed directly: nothing behind it keeps or retries it, so only handled or not.
    const outcome = await handleMessage(h.runtime, { id: req.get("x-request-id") ?? "http", body });
    await h.flushTraces?.(TRACE_FLUSH_MS);
    res.status(messageHandled(outcome) ? 200 : 503).json({ result: outcome.result, detail: outcome.detail ?? "" });
  };
}

export function cloudEventHandler(served: Served, deps: HttpDeps = {}): (event: CloudEvent<unknown>) => Promise<void> {
  const host = lazyHost(served, deps);
  return async (event) => {
    const h = host();
    if (h instanceof ConfigError) throw h;
    const a = await answerPush(h, fromCloudEvent(event));
    await h.flushTraces?.(TRACE_FLUSH_MS);
    if (a.status !== 200) throw new NotHandled(`${a.outcome.result}: ${a.outcome.detail ?? ""}`);
  };
}

/**
 * Thrown so that functions-framework answers non-2xx and Pub/Sub redelivers (or dead-letters).
 * The runtime has already logged why; functions-framework prints `stack`, so it is one line, not a trace.
 */
class NotHandled extends Error {
  constructor(message: string) {
    super(message);
    this.name = "NotHandled";
    this.stack = `message not handled: ${message}`;
  }
}
