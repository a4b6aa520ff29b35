// `crdfn dlq list` / `crdfn dlq redrive`: look at what the queue gave up on, and send it back
// once the cause is fixed. Bodies are key events (no spec, nothing secret) so they can be shown.
import { createHash } from "node:crypto";
import { DeleteMessageCommand, ReceiveMessageCommand, SendMessageCommand, type Message, type SQSClient } from "@aws-sdk/client-sqs";
import { Command } from "commander";
import { fromSqsMessage } from "../clients/queue-message.ts";
import { parseKeyEvent } from "../core/event.ts";
import { adminEnv, required, sqsFrom } from "./settings.ts";

const hint = "run `crdfn dev` or `crdfn cluster up` first, or export the queue URLs";

/** Receives up to `max` messages with a visibility timeout of `visibility` seconds. */
async function receiveSome(sqs: SQSClient, queueUrl: string, max: number, visibility: number): Promise<Message[]> {
  const got: Message[] = [];
  while (got.length < max) {
    const out = await sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: queueUrl,
        MaxNumberOfMessages: Math.min(10, max - got.length),
        VisibilityTimeout: visibility,
        WaitTimeSeconds: 0,
        MessageSystemAttributeNames: ["ApproximateReceiveCount", "SentTimestamp", "MessageGroupId"],
        MessageAttributeNames: ["All"],
      }),
    );
    if (!out.Messages?.length) break;
    got.push(...out.Messages);
  }
  return got;
}

export function describeMessage(m: Message, now = Date.now()): string {
  const { id, body } = fromSqsMessage(m);
  const parsed = parseKeyEvent(body);
  const sent = Number(m.Attributes?.SentTimestamp ?? now);
  const age = `${Math.round((now - sent) / 1000)}s old`;
  if (!parsed.ok) return `${id}  malformed (${parsed.error.slice(0, 120)})  ${age}`;
  const e = parsed.event;
  return `${id}  ${e.kind} ${e.namespace ? `${e.namespace}/` : ""}${e.name}  ${e.type}${e.reason ? `/${e.reason}` : ""}  cluster ${e.cluster}  ${age}`;
}

export function dlqCommand(): Command {
  const dlq = new Command("dlq")
    .description("inspect and redrive the dead-letter queue")
    .addHelpText("after", "\nExamples:\n  $ crdfn dlq list\n  $ crdfn dlq redrive");
  dlq
    .command("list")
    .description("show messages in the dead-letter queue (they stay there)")
    .option("--state-dir <dir>", "where crdfn dev wrote env", ".crdfn")
    .option("--max <n>", "at most this many", (v) => Number(v), 50)
    .addHelpText("after", "\nExamples:\n  $ crdfn dlq list\n  $ crdfn dlq list --max 5 --state-dir .crdfn")
    .action(async (o: { stateDir: string; max: number }) => {
      const env = adminEnv(o.stateDir);
      const sqs = sqsFrom(env);
      try {
        // Hidden for a few seconds so one listing does not show a message twice.
        const messages = await receiveSome(sqs, required(env, "CRDFN_DLQ_URL", hint), o.max, 5);
        if (messages.length === 0) console.log("the dead-letter queue is empty");
        for (const m of messages) console.log(describeMessage(m));
      } finally {
        sqs.destroy();
      }
    });
  dlq
    .command("redrive")
    .description("move dead-lettered messages back to the event queue, to be reconciled again")
    .option("--state-dir <dir>", "where crdfn dev wrote env", ".crdfn")
    .option("--max <n>", "at most this many", (v) => Number(v), 1000)
    .addHelpText("after", "\nExamples:\n  $ crdfn dlq redrive              # after fixing what made them fail\n  $ crdfn dlq redrive --max 10")
    .action(async (o: { stateDir: string; max: number }) => {
      const env = adminEnv(o.stateDir);
      const source = required(env, "CRDFN_DLQ_URL", hint);
      const target = required(env, "CRDFN_QUEUE_URL", hint);
      const sqs = sqsFrom(env);
      let moved = 0;
      try {
        for (const m of await receiveSome(sqs, source, o.max, 60)) {
          const fifo = target.endsWith(".fifo");
          await sqs.send(
            new SendMessageCommand({
              QueueUrl: target,
              MessageBody: m.Body ?? "",
              ...(m.MessageAttributes ? { MessageAttributes: m.MessageAttributes } : {}),
              ...(fifo
                ? {
                    MessageGroupId: m.Attributes?.MessageGroupId ?? "redrive",
                    // A fresh id: the original is likely still inside the 5-minute deduplication window.
                    MessageDeduplicationId: createHash("sha256").update(`redrive:${m.MessageId}`).digest("hex"),
                  }
                : {}),
            }),
          );
          // Deleted only after the copy is safely on the event queue: a crash here duplicates, never loses.
          await sqs.send(new DeleteMessageCommand({ QueueUrl: source, ReceiptHandle: m.ReceiptHandle }));
          moved++;
        }
        console.log(`redrove ${moved} message${moved === 1 ? "" : "s"} to ${target.split("/").pop()}`);
      } finally {
        sqs.destroy();
      }
    });
  return dlq;
}
