// AWS Lambda SQS handler over the runtime, with partial batch responses
// (ReportBatchItemFailures): only failed messages return to the queue.
import { BatchProcessor, EventType, processPartialResponse, SqsFifoPartialProcessorAsync } from "@aws-lambda-powertools/batch";
import type { Context, SQSBatchResponse, SQSEvent, SQSRecord } from "aws-lambda";
import { buildFromEnv, type Served } from "../runtime/entry.ts";
import { ConfigError } from "../../core/config-error.ts";
import { fromLambdaRecord } from "../../clients/queue-message.ts";
import { messageHandled } from "../runtime/outcome.ts";
import type { Runtime } from "../runtime/runtime.ts";

export interface LambdaDeps {
  /** Supplied by tests; otherwise built from the environment on the first invocation. */
  runtime?: Runtime;
  env?: NodeJS.ProcessEnv;
}

export type SqsLambdaHandler = (event: SQSEvent, context: Context) => Promise<SQSBatchResponse>;

/** `served`: the operator (or operators) whose events arrive on the queue. */
export function lambdaHandler(served: Served, deps: LambdaDeps = {}): SqsLambdaHandler {
  // Built on the first invocation, not at import (config errors then surface as a failed
  // invocation with one clear line), and kept for warm invocations.
  let runtime = deps.runtime;
  return async (event, context) => {
    // Metrics (EMF) once per invocation, however it ends: disposed when this function returns.
    using _metrics = { [Symbol.dispose]: () => runtime?.flushMetrics?.() };
    let built: Runtime;
    try {
      built = runtime ??= buildFromEnv(served, deps.env ?? process.env).runtime;
    } catch (error) {
      if (!(error instanceof ConfigError)) throw error;
      // Misconfigured: say so in one line and return the whole batch (the DLQ keeps it safe).
      console.error(error.message);
      return { batchItemFailures: event.Records.map((r) => ({ itemIdentifier: r.messageId })) };
    }
    const recordHandler = async (record: SQSRecord): Promise<void> => {
      const outcome = await built.handle(fromLambdaRecord(record));
      // Throwing marks the record failed: it stays in the queue for its visibility timeout.
      if (!messageHandled(outcome)) throw new Error(`${outcome.result}: ${outcome.detail}`);
    };
    const fifo = event.Records.some((r) => r.eventSourceARN.endsWith(".fifo"));
    // FIFO: in order, and after a group's first failure the rest of that group fails too
    // (skipGroupOnError), while other groups carry on.
    return fifo
      ? processPartialResponse(event, recordHandler, new SqsFifoPartialProcessorAsync(), { context, skipGroupOnError: true, throwOnFullBatchFailure: false })
      : processPartialResponse(event, recordHandler, new BatchProcessor(EventType.SQS), { context, throwOnFullBatchFailure: false });
  };
}
