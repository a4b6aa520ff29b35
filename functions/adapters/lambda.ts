// AWS Lambda SQS handler over the runtime, with partial batch responses
// (ReportBatchItemFailures): only failed messages return to the queue. Lambda cannot pause its
// event source, so while the API server is unavailable each record is deferred (re-sent delayed
// on the requeue queue and reported handled) instead of spending its receives; see outage.ts.
import { BatchProcessor, EventType, processPartialResponse } from "@aws-lambda-powertools/batch";
import type { SQSClient } from "@aws-sdk/client-sqs";
import type { Context, SQSBatchResponse, SQSEvent, SQSRecord } from "aws-lambda";
import type { Logger } from "pino";
import { buildFromEnv, type Served } from "../runtime/entry.ts";
import { ConfigError } from "../../core/config-error.ts";
import { fromLambdaRecord } from "../../clients/queue-message.ts";
import { messageHandled, type Outcome } from "../runtime/outcome.ts";
import type { Requeuer } from "../runtime/requeue.ts";
import type { Runtime } from "../runtime/runtime.ts";
import { givenSqsClient, type SqsClientSource } from "../runtime/sqs-client.ts";
import { backOff, behind, createCircuits, deadLetterLimits, defer, report, type Circuits } from "./outage.ts";

export interface LambdaDeps {
  /** Supplied by tests; otherwise built from the environment on the first invocation. */
  runtime?: Runtime;
  env?: NodeJS.ProcessEnv;
  /** With `runtime`: the clients for deferral and retry backoff (built from the environment otherwise). */
  sqs?: SQSClient;
  requeuer?: Requeuer;
  logger?: Logger;
  clock?: () => Date;
  /** Visibility of a failed record's first retry; doubles per receive. Default 30 s. */
  retryBaseSeconds?: number;
}

export type SqsLambdaHandler = (event: SQSEvent, context: Context) => Promise<SQSBatchResponse>;

interface Host {
  runtime: Runtime;
  sqs?: SqsClientSource;
  requeuer?: Requeuer;
  logger?: Logger;
  clock: () => Date;
  circuits?: Circuits;
  limits?: (queueUrl: string) => Promise<number | undefined>;
  queueUrlOf?: (arn: string) => Promise<string>;
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
        .then((o) => o.QueueUrl ?? "");
      url.catch(() => known.delete(arn));
      known.set(arn, url);
    }
    return url;
  };
}

function hostOf(served: Served, deps: LambdaDeps): Host {
  let host: Host;
  if (deps.runtime) {
    const { runtime, sqs, requeuer, logger } = deps;
    host = { runtime, ...(sqs ? { sqs: givenSqsClient(sqs) } : {}), ...(requeuer ? { requeuer } : {}), ...(logger ? { logger } : {}), clock: deps.clock ?? (() => new Date()) };
  } else {
    const { runtime, sqs, requeuer, logger, clock } = buildFromEnv(served, deps.env ?? process.env);
    host = { runtime, sqs: sqs.client, ...(requeuer ? { requeuer } : {}), logger, clock };
  }
  if (host.logger) host.circuits = createCircuits({ clock: host.clock, logger: host.logger });
  if (host.sqs) {
    host.limits = deadLetterLimits(host.sqs);
    host.queueUrlOf = queueUrls(host.sqs);
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
    // FIFO: each group in order (a chain of promises per group), groups in parallel; what
    // follows a failure in its group is settled by `behind` instead of being tried.
    const chains = new Map<string, Promise<Outcome | undefined>>();
    const recordHandler = (record: SQSRecord): Promise<void> => {
      const group = record.attributes?.MessageGroupId;
      const previous = group === undefined ? Promise.resolve(undefined) : (chains.get(group) ?? Promise.resolve(undefined));
      const settled = previous.then((before) => settle(h, record, before, deps));
      if (group !== undefined) chains.set(group, settled.catch(() => ({ result: "retry" as const, detail: "failed" })));
      return settled.then((outcome) => {
        // Throwing marks the record failed: it stays in the queue (its visibility set by backOff).
        if (!outcome.handled) throw new Error(`${outcome.result}: ${outcome.detail}`);
      });
    };
    // Awaited, so the metrics above are flushed after the batch, not before.
    return await processPartialResponse(event, recordHandler, new BatchProcessor(EventType.SQS), { context, throwOnFullBatchFailure: false });
  };
}

/** One record: try it (or settle it by what came before it in its group), defer an outage, back a failure off. */
async function settle(h: Host, record: SQSRecord, before: Outcome | undefined, deps: LambdaDeps): Promise<Outcome & { handled: boolean }> {
  const message = fromLambdaRecord(record);
  const log = h.logger;
  // The circuit of the record's cluster: another cluster's outage never holds this one back.
  const circuit = h.circuits?.of(message);
  const admission = circuit?.admit() ?? "closed";
  const instead = typeof admission === "number" ? behind({ result: "unavailable" }) : behind(before);
  if (instead && typeof admission !== "number") circuit?.release();
  const outcome: Outcome = instead ?? (await h.runtime.handle(message));
  if (!instead && circuit) report(circuit, outcome);
  if (outcome.result === "unavailable" && circuit && log && (await defer(message, h.requeuer, circuit.deferSeconds(), h.clock, log))) return { ...outcome, handled: true };
  if (outcome.result === "retry" && h.sqs && h.queueUrlOf && h.limits && log) {
    const queueUrl = await h.queueUrlOf(record.eventSourceARN).catch(() => "");
    if (queueUrl) {
      const hint = (outcome as { delaySeconds?: number }).delaySeconds;
      await backOff(h.sqs, queueUrl, { ...message, receiptHandle: record.receiptHandle }, outcome.detail, { baseSeconds: deps.retryBaseSeconds ?? 30 }, await h.limits(queueUrl), log, hint);
    }
  }
  return { ...outcome, handled: messageHandled(outcome) };
}
