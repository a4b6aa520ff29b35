// Lambda's SQS event source, played by a test: receive a batch, invoke the handler, delete what it
// did not report failed (ReportBatchItemFailures), as AWS does. `concurrency` loops run side by
// side, as Lambda runs several invocations of one FIFO queue (never two of one message group).
import { DeleteMessageBatchCommand, ReceiveMessageCommand, type SQSClient } from "@aws-sdk/client-sqs";
import type { Context, SQSBatchResponse, SQSEvent } from "aws-lambda";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parse } from "yaml";
import { packageRoot } from "../../emulator/paths.ts";
import { lambdaEvent } from "./functions-environment.ts";

/** The repository's serverless.yml's custom.visibilityTimeoutSeconds (180), as crdfn generates it. */
const DEPLOYED_VISIBILITY_SECONDS = Number(
  (parse(readFileSync(join(packageRoot, "serverless.yml"), "utf8")) as { custom: { visibilityTimeoutSeconds: number } }).custom.visibilityTimeoutSeconds,
);

export interface EventSource {
  stop(): Promise<void>;
}

/**
 * `visibilityTimeoutSeconds`: what a received batch is hidden for. Default, the generated stack's
 * (serverless.yml custom.visibilityTimeoutSeconds, 180: ≥ 6 × the function timeout, so Lambda
 * never hands out a message again while the invocation that holds it runs). The local queue's own
 * 30 s is one a batch can outlast on a loaded machine, as no real invocation could: a test that
 * wants a dropped record back sooner passes its own.
 */
export function startLambdaEventSource(
  sqs: SQSClient,
  queueUrl: string,
  handler: (event: SQSEvent, context: Context) => Promise<SQSBatchResponse>,
  concurrency = 1,
  visibilityTimeoutSeconds = DEPLOYED_VISIBILITY_SECONDS,
): EventSource {
  const abort = new AbortController();
  const loop = async (): Promise<void> => {
    while (!abort.signal.aborted) {
      const out = await sqs
        .send(
          new ReceiveMessageCommand({
            QueueUrl: queueUrl,
            MaxNumberOfMessages: 10,
            WaitTimeSeconds: 1,
            MessageSystemAttributeNames: ["All"],
            MessageAttributeNames: ["All"],
            VisibilityTimeout: visibilityTimeoutSeconds,
          }),
        )
        .catch((error: unknown) => {
          if (!abort.signal.aborted) console.error(`# receive failed: ${(error as Error).message}`);
          return { Messages: [] };
        });
      const batch = out.Messages ?? [];
      if (batch.length === 0) continue;
      let response: SQSBatchResponse;
      try {
        response = await handler(lambdaEvent(batch, queueUrl), {} as Context);
      } catch (error) {
        // Lambda would retry the whole batch after its visibility timeout; say why, once per batch.
        console.error(`# the Lambda handler threw: ${(error as Error).stack ?? String(error)}`);
        continue;
      }
      const failed = new Set(response.batchItemFailures.map((f) => f.itemIdentifier));
      const done = batch.filter((m) => !failed.has(m.MessageId ?? ""));
      if (done.length === 0) continue;
      // A record not deleted holds its FIFO group until its visibility timeout: say so, as
      // Lambda's own metrics would show it.
      const deleted = await sqs
        .send(new DeleteMessageBatchCommand({ QueueUrl: queueUrl, Entries: done.map((m, i) => ({ Id: String(i), ReceiptHandle: m.ReceiptHandle ?? "" })) }))
        .catch((error: unknown) => ({ Failed: [{ Id: "*", Message: (error as Error).message }] }));
      for (const f of deleted.Failed ?? [])
        console.error(
          `# the event source could not delete a handled record (${f.Id === "*" ? "the whole batch" : (done[Number(f.Id)]?.MessageId ?? f.Id)}): ${f.Message ?? "?"}`,
        );
    }
  };
  const loops = Array.from({ length: concurrency }, loop);
  return {
    async stop() {
      abort.abort();
      await Promise.all(loops);
    },
  };
}
