// AWS Lambda SQS handler over the runtime, with partial batch responses
// (ReportBatchItemFailures): only the records reported failed stay in the queue. The batch is
// settled by the same policy as the local poller's (settle.ts): what is deleted is reported
// handled; what is held or released has its visibility set and is reported failed; a long
// deferral is re-sent into its own FIFO group and reported handled. Lambda cannot pause its
// event source, so while the API server is unavailable records are deferred (settle.ts).
// Traced (OTEL_EXPORTER_OTLP_ENDPOINT), the invocation's spans are flushed before it returns:
// Lambda freezes the process once it has, and a span still in the exporter's buffer may never go.
import type { SQSClient } from "@aws-sdk/client-sqs";
import type { Context, SQSBatchResponse, SQSEvent, SQSRecord } from "aws-lambda";
import { pino, type Logger } from "pino";
import { buildFromEnv, TRACE_FLUSH_MS, type Served } from "../runtime/entry.ts";
import { EventKeysUnavailable } from "../runtime/event-keys-source.ts";
import { ConfigError } from "../../core/config-error.ts";
import { DEFAULT_REQUEST_TIMEOUT_MS } from "../../clients/kube-http.ts";
import { contextFrom, type Tracing } from "../../clients/tracing.ts";
import type { Tracer } from "@opentelemetry/api";
import type { Delivery } from "../runtime/delivery.ts";
import { fromLambdaRecord } from "../../clients/queue-message.ts";
import type { Outcome } from "../runtime/outcome.ts";
import type { Runtime } from "../runtime/runtime.ts";
import { givenSqsClient, type SqsClientSource } from "../runtime/sqs-client.ts";
import {
  DEFAULT_MAX_DEFER_SECONDS,
  DEFAULT_RETRY_BASE_SECONDS,
  resendRequest,
  settleBatch,
  settlementOf,
  type Settlement,
  type SettlePolicy,
} from "./settle.ts";
import { createCircuits, type Circuits } from "./circuit.ts";
import { queueFacts, type QueueFacts } from "./queue-facts.ts";

export interface LambdaDeps {
  /** Supplied by tests; otherwise built from the environment on the first invocation. */
  runtime?: Runtime;
  env?: NodeJS.ProcessEnv;
  /** With `runtime`: the client for deferral and retry backoff (built from the environment otherwise). */
  sqs?: SQSClient;
  logger?: Logger;
  clock?: () => Date;
  /** Visibility of a failed record's first retry; doubles per receive. Default 5 s. */
  retryBaseSeconds?: number;
  /** A record deferred for an outage longer than this is left to the dead-letter queue. Default 6 h. */
  maxDeferSeconds?: number;
  /** With `runtime`: the tracing flushed before each invocation returns. */
  tracing?: Tracing;
}

export type SqsLambdaHandler = (event: SQSEvent, context: Context) => Promise<SQSBatchResponse>;

interface Host {
  runtime: Runtime;
  sqs?: SqsClientSource;
  logger: Logger;
  clock: () => Date;
  refreshKeys: () => Promise<void>;
  circuits: Circuits;
  facts?: (queueUrl: string) => Promise<QueueFacts>;
  queueUrlOf?: (arn: string) => Promise<string>;
  flushTraces: (timeoutMs: number) => Promise<void>;
  tracer: () => Promise<Tracer | undefined>;
}

/** An event source ARN (arn:aws:sqs:region:account:name) to its queue URL, asked of SQS once per queue. */
function queueUrls(sqs: SqsClientSource): (arn: string) => Promise<string> {
  const known = new Map<string, Promise<string>>();
  return (arn) => {
    let url = known.get(arn);
    if (!url) {
      const [, , , , account, name] = arn.split(":");
      url = sqs()
        .then(({ client, sdk }) => client.send(new sdk.GetQueueUrlCommand({ QueueName: name, ...(account ? { QueueOwnerAWSAccountId: account } : {}) })))
        .then((answer) => answer.QueueUrl ?? "");
      url.catch(() => known.delete(arn));
      known.set(arn, url);
    }
    return url;
  };
}

function hostOf(served: Served, deps: LambdaDeps): Host {
  const built = deps.runtime
    ? {
        runtime: deps.runtime,
        sqs: deps.sqs ? givenSqsClient(deps.sqs) : undefined,
        logger: deps.logger ?? pino({ level: "silent" }),
        clock: deps.clock ?? (() => new Date()),
        refreshKeys: () => Promise.resolve(),
        flushTraces: (timeoutMs: number) => deps.tracing?.flush(timeoutMs) ?? Promise.resolve(),
        tracer: () => Promise.resolve(deps.tracing?.enabled ? deps.tracing.tracer : undefined),
      }
    : (({ runtime, sqs, logger, clock, refreshKeys, flushTraces, tracer }) => ({ runtime, sqs: sqs.client, logger, clock, refreshKeys, flushTraces, tracer }))(
        buildFromEnv(served, deps.env ?? process.env, { refreshesKeys: true }),
      );
  const host: Host = { ...built, circuits: createCircuits({ clock: built.clock, logger: built.logger }) };
  if (built.sqs) {
    host.facts = queueFacts(built.sqs);
    host.queueUrlOf = queueUrls(built.sqs);
  }
  return host;
}

/** `served`: the operator (or operators) whose events arrive on the queue. */
export function lambdaHandler(served: Served, deps: LambdaDeps = {}): SqsLambdaHandler {
  // Built on the first invocation, not at import (config errors then surface as a failed
  // invocation with one clear line), and kept for warm invocations, circuit included.
  let host: Host | undefined;
  return async (event, context) => {
    // Metrics (EMF) once per invocation, however it ends: disposed when this function returns.
    using _metrics = { [Symbol.dispose]: () => host?.runtime.flushMetrics?.() };
    let h: Host;
    try {
      h = host ??= hostOf(served, deps);
    } catch (error) {
      if (!(error instanceof ConfigError)) throw error;
      // Misconfigured: say so in one line and return the whole batch (the DLQ keeps it safe).
      console.error(error.message);
      return { batchItemFailures: event.Records.map((r) => ({ itemIdentifier: r.messageId })) };
    }
    try {
      return await handleBatch(h, event, context, deps);
    } finally {
      await h.flushTraces(TRACE_FLUSH_MS);
    }
  };
}

/** One invocation's batch, judged, handled and settled: the records to report failed. */
async function handleBatch(h: Host, event: SQSEvent, context: Context, deps: LambdaDeps): Promise<SQSBatchResponse> {
  const queueUrl = await queueUrlOfBatch(h, event.Records);
  const limit = queueUrl && h.facts ? (await h.facts(queueUrl)).maxReceiveCount : undefined;
  /** The settle policy for a record of `cluster` (its circuit's deferral). */
  const policyFor = (cluster: string) =>
    ({
      limit,
      deferSeconds: () => h.circuits.of(cluster).deferSeconds(),
      retryBaseSeconds: deps.retryBaseSeconds ?? DEFAULT_RETRY_BASE_SECONDS,
      maxDeferSeconds: deps.maxDeferSeconds ?? DEFAULT_MAX_DEFER_SECONDS,
      now: h.clock().getTime(),
      log: h.logger,
    }) satisfies SettlePolicy;
  try {
    await h.refreshKeys();
  } catch (error) {
    if (!(error instanceof EventKeysUnavailable)) throw error;
    // The secret store's outage, not the messages' fault: every record is deferred unjudged as
    // an API server outage is (held in its group; re-sent with a fresh receive budget before its
    // last receive), so none reaches the dead-letter queue for want of a key. Its deferral
    // attributes are taken as carried: no key is at hand to prove them, and a forged "since"
    // could only send its own message to the dead-letter queue sooner.
    h.logger.error(error.message);
    const unavailable: Outcome = { result: "unavailable", detail: error.message };
    const failed = await Promise.all(
      event.Records.map(async (record) => {
        const settlement = settlementOf(unavailable, fromLambdaRecord(record), policyFor(""));
        return (await carryOut(h, queueUrl, record, settlement)) ? undefined : record.messageId;
      }),
    );
    return { batchItemFailures: failed.filter((id): id is string => id !== undefined).map((itemIdentifier) => ({ itemIdentifier })) };
  }
  // Each record judged once, here, before anything else: what follows gets the verified event.
  const received = event.Records.map((record) => ({ record, delivery: h.runtime.receive(fromLambdaRecord(record)) }));
  const settled = await settleBatch(received, {
    deliveryOf: (r) => r.delivery,
    groupOf: (r) => r.record.attributes?.MessageGroupId,
    runtime: h.runtime,
    circuits: h.circuits,
    log: h.logger,
    ...startableIn(context),
    policy: (outcome, delivery) => settlementOf(outcome, delivery.message, policyFor(delivery.ok ? delivery.event.cluster : "")),
  });
  const tracer = await h.tracer();
  const failed = await Promise.all(
    [...settled].map(async ([{ record, delivery }, { settlement }]) =>
      (await settledInTrace(tracer, delivery, settlement, () => carryOut(h, queueUrl, record, settlement))) ? undefined : record.messageId,
    ),
  );
  return { batchItemFailures: failed.filter((id): id is string => id !== undefined).map((itemIdentifier) => ({ itemIdentifier })) };
}

/**
 * What a reconcile started now may need to finish: one API request's timeout (a hung API server
 * answers nothing) and the settling after it. Past that point of the function's timeout a record
 * is deferred untried: cut off by the timeout it would come back only after the queue's
 * visibility timeout, with a receive spent.
 */
const START_MARGIN_MS = DEFAULT_REQUEST_TIMEOUT_MS + 5000;

/** The batch's `startable`, from the invocation's context; none where the context has no clock (a test's). */
function startableIn(context: Context | undefined): { startable?: () => boolean } {
  if (typeof context?.getRemainingTimeInMillis !== "function") return {};
  // A function timeout shorter than twice the margin still starts records in its first half.
  const margin = Math.min(START_MARGIN_MS, context.getRemainingTimeInMillis() / 2);
  return { startable: () => context.getRemainingTimeInMillis() > margin };
}

/** The queue every record of a batch came from (one event source mapping, one queue). */
async function queueUrlOfBatch(h: Host, records: SQSRecord[]): Promise<string | undefined> {
  const arn = records[0]?.eventSourceARN;
  if (!arn || !h.queueUrlOf) return undefined;
  return h.queueUrlOf(arn).catch((error: unknown) => {
    h.logger.warn(
      { error: (error as Error).message },
      "cannot look up the queue URL (sqs:GetQueueUrl); failed records keep the queue's own visibility timeout",
    );
    return undefined;
  });
}

/**
 * A verified record's settlement as "function settle" in its change's trace (beside its handling,
 * under the span that sent it): what became of the message on the queue, and how long that took.
 */
async function settledInTrace(tracer: Tracer | undefined, delivery: Delivery, s: Settlement, work: () => Promise<boolean>): Promise<boolean> {
  if (!tracer || !delivery.ok) return work();
  const span = tracer.startSpan(
    "function settle",
    { attributes: { "crdfn.settlement": s.action, "messaging.message.id": delivery.message.id } },
    contextFrom(delivery.event),
  );
  try {
    const handled = await work();
    span.setAttribute("crdfn.reported_failed", !handled);
    return handled;
  } finally {
    span.end();
  }
}

/**
 * Carries out one record's settlement; true when the record is to be reported handled (Lambda
 * deletes it). Without the queue's URL, visibility cannot be set: the queue's own timeout applies.
 */
async function carryOut(h: Host, queueUrl: string | undefined, record: SQSRecord, s: Settlement): Promise<boolean> {
  if (s.action === "delete") return true;
  if (!queueUrl || !h.sqs) return false;
  try {
    const { client, sdk } = await h.sqs();
    const visibility = (seconds: number) =>
      client.send(new sdk.ChangeMessageVisibilityCommand({ QueueUrl: queueUrl, ReceiptHandle: record.receiptHandle, VisibilityTimeout: seconds }));
    if (s.action === "resend") {
      try {
        const m = {
          Body: record.body,
          MessageId: record.messageId,
          Attributes: { ...(record.attributes.MessageGroupId ? { MessageGroupId: record.attributes.MessageGroupId } : {}) },
        };
        await client.send(new sdk.SendMessageCommand(resendRequest(queueUrl, m, s)));
        return true;
      } catch (error) {
        h.logger.warn({ messageId: record.messageId, error: (error as Error).message }, "could not re-send the deferred record; holding it instead");
        await visibility(s.seconds);
        return false;
      }
    }
    await visibility(s.action === "hold" ? s.seconds : 0);
  } catch (error) {
    h.logger.warn(
      { messageId: record.messageId, action: s.action, error: (error as Error).message },
      "settling a record failed; the queue's visibility timeout applies",
    );
  }
  return false;
}
