// Reads what the bridge published: drains a queue and keeps every key event, and checks the
// events per object against what they must say.
import { DeleteMessageBatchCommand, ReceiveMessageCommand, type SQSClient } from "@aws-sdk/client-sqs";
import { parseKeyEvent, type KeyEvent } from "../../core/event.ts";

export interface Received {
  event: KeyEvent;
  groupId: string;
  dedupId: string;
  /** When the queue accepted it (SentTimestamp, epoch ms). */
  sentAt: number;
}

/** Drains a queue (receive + delete) and keeps every event, in per-group delivery order. */
export class QueueReader {
  readonly all: Received[] = [];
  readonly #sqs: SQSClient;
  readonly #url: string;
  constructor(sqs: SQSClient, url: string) {
    this.#sqs = sqs;
    this.#url = url;
  }

  /** Receives until a receive comes back empty; returns how many arrived. */
  async drain(): Promise<number> {
    let got = 0;
    for (;;) {
      const out = await this.#sqs.send(
        new ReceiveMessageCommand({
          QueueUrl: this.#url,
          MaxNumberOfMessages: 10,
          WaitTimeSeconds: 0,
          VisibilityTimeout: 60,
          MessageSystemAttributeNames: ["All"],
        }),
      );
      const msgs = out.Messages ?? [];
      if (msgs.length === 0) return got;
      for (const m of msgs) {
        const parsed = parseKeyEvent(m.Body ?? "");
        if (!parsed.ok) throw new Error(`queue holds a message outside the contract: ${parsed.error}`);
        this.all.push({
          event: parsed.event,
          groupId: m.Attributes?.MessageGroupId ?? "",
          dedupId: m.Attributes?.MessageDeduplicationId ?? "",
          sentAt: Number(m.Attributes?.SentTimestamp ?? 0),
        });
      }
      got += msgs.length;
      await this.#sqs.send(
        new DeleteMessageBatchCommand({ QueueUrl: this.#url, Entries: msgs.map((m, i) => ({ Id: `d${i}`, ReceiptHandle: m.ReceiptHandle })) }),
      );
    }
  }

  /** Drains repeatedly until `done()` holds; throws with `describe()` after the deadline. */
  async until(done: () => boolean, timeoutMs: number, describe: () => string = () => ""): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      await this.drain();
      if (done()) return;
      if (Date.now() > deadline) throw new Error(`queue did not reach the expected state in ${timeoutMs} ms: ${describe()}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  /** Events per object name (one namespace), in delivery order. */
  byName(namespace: string): Map<string, KeyEvent[]> {
    const m = new Map<string, KeyEvent[]>();
    for (const { event } of this.all) {
      if (event.namespace !== namespace) continue;
      const list = m.get(event.name) ?? [];
      list.push(event);
      m.set(event.name, list);
    }
    return m;
  }
}

/** What an object's last event must say. */
/** `or`: a later version that may be announced instead (a status write bringing a waiting announcement up to date). */
export type Expected = { deleted: true } | { deleted: false; resourceVersion: string; or?: string };

/** Names whose last event does not match, with what was seen. */
export function mismatches(events: Map<string, KeyEvent[]>, expected: Map<string, Expected>): string[] {
  const bad: string[] = [];
  for (const [name, want] of expected) {
    const last = events.get(name)?.at(-1);
    const good =
      last !== undefined &&
      (want.deleted ? last.type === "DELETED" : last.type !== "DELETED" && (last.resourceVersion === want.resourceVersion || last.resourceVersion === want.or));
    if (!good)
      bad.push(
        `${name}: want ${want.deleted ? "DELETED" : want.resourceVersion}, last ${last === undefined ? "none" : `${last.type}@${last.resourceVersion}`}`,
      );
  }
  return bad;
}

/** Per-object order: resourceVersions never go backwards within an object's events. */
export function orderViolations(events: Map<string, KeyEvent[]>): string[] {
  const bad: string[] = [];
  for (const [name, list] of events) {
    for (let i = 1; i < list.length; i++) {
      const a = list[i - 1];
      const b = list[i];
      if (a !== undefined && b !== undefined && BigInt(b.resourceVersion) < BigInt(a.resourceVersion))
        bad.push(`${name}: ${a.resourceVersion} then ${b.resourceVersion}`);
    }
  }
  return bad;
}
