// `crdfn dlq list` / `crdfn dlq redrive`: look at what every operator's queue gave up on, and send
// it back to that queue once the cause is fixed. On the Cloud Run target: the dead-letter topic's
// pull subscription, redriven into the operator's topic with the object's ordering key. Bodies are
// key events so they can be shown.
import { createHash } from "node:crypto";
import {
  ChangeMessageVisibilityBatchCommand,
  DeleteMessageCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
  type Message,
  type SQSClient,
} from "@aws-sdk/client-sqs";
import { Command } from "commander";
import { fromSqsMessage } from "../../clients/queue-message.ts";
import { parseKeyEvent } from "../../core/event.ts";
import { adminTarget, onPubSub, onQueue, type AdminTarget } from "./admin-target.ts";
import { pubSubAdmin, type PubSubAdmin } from "./pubsub-admin.ts";

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
  return describeLetter(id, body, Number(m.Attributes?.SentTimestamp ?? now), now);
}

/** One line about a dead letter: its id, the object its key event names, how old it is. */
export function describeLetter(id: string, body: string, sentAt: number, now = Date.now()): string {
  const parsed = parseKeyEvent(body);
  const age = `${Math.round((now - sentAt) / 1000)}s old`;
  if (!parsed.ok) return `${id}  malformed (${parsed.error.slice(0, 120)})  ${age}`;
  const e = parsed.event;
  // An unsigned event (from before signed events) would be refused again: its object is re-announced instead.
  const unsigned =
    e.mac === undefined
      ? `  unsigned v${e.v} event: a redrive is refused, run crdfn resync ${e.plural} ${e.name}${e.namespace ? ` -n ${e.namespace}` : ""}`
      : "";
  return `${id}  ${e.kind} ${e.namespace ? `${e.namespace}/` : ""}${e.name}  ${e.type}${e.reason ? `/${e.reason}` : ""}  cluster ${e.cluster}  ${age}${unsigned}`;
}

/**
 * The dead letter with this message id, hidden while it is held (the others received on the way
 * are made visible again at once): `remove` deletes it, `release` makes it visible again.
 */
export async function holdSqsDeadLetter(
  sqs: SQSClient,
  queueUrl: string,
  id: string,
): Promise<{ id: string; body: string; remove: () => Promise<void>; release: () => Promise<void> } | undefined> {
  const passed: Message[] = [];
  let found: Message | undefined;
  try {
    while (found === undefined) {
      // A FIFO queue hands out one message per group while another is in flight: the ones passed
      // stay hidden until the end, so each receive reaches further.
      const batch = await receiveSome(sqs, queueUrl, 10, 600);
      if (batch.length === 0) break;
      for (const m of batch) {
        if (found === undefined && m.MessageId === id) found = m;
        else passed.push(m);
      }
    }
  } finally {
    for (let i = 0; i < passed.length; i += 10) {
      const entries = passed.slice(i, i + 10).map((m, j) => ({ Id: String(j), ReceiptHandle: m.ReceiptHandle ?? "", VisibilityTimeout: 0 }));
      await sqs.send(new ChangeMessageVisibilityBatchCommand({ QueueUrl: queueUrl, Entries: entries }));
    }
  }
  if (found === undefined) return undefined;
  const handle = found.ReceiptHandle ?? "";
  return {
    id,
    body: found.Body ?? "",
    remove: async () => void (await sqs.send(new DeleteMessageCommand({ QueueUrl: queueUrl, ReceiptHandle: handle }))),
    release: async () =>
      void (await sqs.send(
        new ChangeMessageVisibilityBatchCommand({ QueueUrl: queueUrl, Entries: [{ Id: "0", ReceiptHandle: handle, VisibilityTimeout: 0 }] }),
      )),
  };
}

/**
 * Moves messages until the dead-letter queue is empty. A FIFO queue hands out one message per
 * group while that group has one in flight, so one pass of receives cannot see them all: each
 * message is deleted as soon as its copy is sent, which releases its group for the next receive.
 */
export async function redrive(sqs: SQSClient, source: string, target: string, max: number): Promise<{ count: number; byKind: Map<string, number> }> {
  const fifo = target.endsWith(".fifo");
  const byKind = new Map<string, number>();
  let count = 0;
  while (count < max) {
    const batch = await receiveSome(sqs, source, Math.min(10, max - count), 60);
    if (batch.length === 0) break;
    for (const m of batch) {
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
      const parsed = parseKeyEvent(m.Body ?? "");
      const kind = parsed.ok ? parsed.event.kind : "malformed";
      byKind.set(kind, (byKind.get(kind) ?? 0) + 1);
      count++;
    }
  }
  return { count, byKind };
}

const settingsOption = [
  "--settings <file>",
  "a deployment's deploy settings: its operators' dead-letter queues (AWS credentials from the environment) or, target cloudrun, dead-letter subscriptions (application default credentials)",
] as const;

/** One line per move: how many, from where to where, and of which kinds, as "(2 Greeting, 1 CronTab)". */
function movedLine(moved: { count: number; byKind: Map<string, number> }, from: string, to: string): string {
  const kinds = [...moved.byKind].map(([k, n]) => `${n} ${k}`).join(", ");
  const last = (name: string) => name.split("/").pop();
  return `redrove ${moved.count} message${moved.count === 1 ? "" : "s"} from ${last(from)} to ${last(to)}${kinds ? ` (${kinds})` : ""}`;
}

/** The operators with nothing dead-lettered, after the letters of the others. */
function emptyLine(empty: string[], of: number, what: "queue" | "subscription"): string | undefined {
  if (empty.length === 0) return undefined;
  // A local queue pair may have no operator's name to show.
  const names = empty.filter((n) => n !== "").join(", ");
  const where = of === 1 ? `the dead-letter ${what} is empty` : empty.length === of ? `the dead-letter ${what}s are empty` : "empty";
  return names ? `${where}: ${names}` : where;
}

/** What a subcommand does on each target, with its client (built and closed by onTarget). */
interface DlqAction {
  sqs(t: AdminTarget, sqs: SQSClient, max: number): Promise<void>;
  pubsub(t: AdminTarget, admin: PubSubAdmin, pubsub: NonNullable<AdminTarget["pubsub"]>, max: number): Promise<void>;
}

async function onTarget(opts: { stateDir: string; settings?: string; max: number }, action: DlqAction): Promise<void> {
  const t = await adminTarget(opts);
  if (t.pubsub) {
    const admin = await pubSubAdmin(t.pubsub.connection);
    try {
      return await action.pubsub(t, admin, t.pubsub, opts.max);
    } finally {
      await admin.close();
    }
  }
  const sqs = t.sqs!;
  try {
    await action.sqs(t, sqs, opts.max);
  } finally {
    sqs.destroy();
  }
}

const list: DlqAction = {
  async sqs(t, sqs, max) {
    const empty: string[] = [];
    for (const { operator, deadLetters } of t.pairs) {
      // Hidden for a few seconds so one listing does not show a message twice.
      const messages = await onQueue(t, deadLetters, () => receiveSome(sqs, deadLetters, max, 5));
      if (messages.length === 0) empty.push(operator);
      for (const m of messages) console.log(`${operator ? `${operator}  ` : ""}${describeMessage(m)}`);
    }
    const line = emptyLine(empty, t.pairs.length, "queue");
    if (line) console.log(line);
  },
  async pubsub(t, admin, pubsub, max) {
    const empty: string[] = [];
    for (const { operator, names } of pubsub.pairs) {
      const letters = await onPubSub(t, names.deadLetterSubscription, () => admin.peek(names.deadLetterSubscription, max));
      if (letters.length === 0) empty.push(operator);
      for (const l of letters) console.log(`${operator}  ${describeLetter(l.id, l.body, l.publishTime.getTime())}`);
    }
    const line = emptyLine(empty, pubsub.pairs.length, "subscription");
    if (line) console.log(line);
  },
};

const redriveAll: DlqAction = {
  async sqs(t, sqs, max) {
    for (const { deadLetters, events } of t.pairs) {
      const moved = await onQueue(t, deadLetters, () => redrive(sqs, deadLetters, events, max));
      console.log(movedLine(moved, deadLetters, events));
    }
  },
  async pubsub(t, admin, pubsub, max) {
    for (const { names } of pubsub.pairs) {
      const moved = await onPubSub(t, names.deadLetterSubscription, () => admin.redrive(names, max));
      console.log(movedLine(moved, names.deadLetterSubscription, names.topic));
    }
  },
};

export function dlqCommand(): Command {
  const dlq = new Command("dlq")
    .description("inspect and redrive the dead-letter queues")
    .addHelpText("after", "\nExamples:\n  $ crdfn dlq list\n  $ crdfn dlq redrive\n  $ crdfn dlq list --settings crdfn.deploy.yaml");
  // Both act on the same dead-letter queues: those of crdfn dev's state, or of a deployment.
  const subcommand = (name: string, description: string, max: number, examples: string, action: DlqAction) =>
    dlq
      .command(name)
      .description(description)
      .option("--state-dir <dir>", "where crdfn dev wrote env", ".crdfn")
      .option(...settingsOption)
      .option("--max <n>", "at most this many per dead-letter queue", (v) => Number(v), max)
      .addHelpText("after", `\nExamples:\n${examples}`)
      .action((opts: { stateDir: string; settings?: string; max: number }) => onTarget(opts, action));
  subcommand(
    "list",
    "show the messages in every operator's dead-letter queue (they stay there)",
    50,
    "  $ crdfn dlq list\n  $ crdfn dlq list --max 5 --state-dir .crdfn\n  $ crdfn dlq list --settings crdfn.deploy.yaml",
    list,
  );
  subcommand(
    "redrive",
    "move every dead-lettered message back to its operator's event queue, to be reconciled again",
    100_000,
    "  $ crdfn dlq redrive              # after fixing what made them fail\n  $ crdfn dlq redrive --max 10\n  $ crdfn dlq redrive --settings crdfn.deploy.yaml",
    redriveAll,
  );
  return dlq;
}
