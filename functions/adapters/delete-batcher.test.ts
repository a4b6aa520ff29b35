import { describe, it } from "node:test";
import assert from "node:assert/strict";
import * as sdk from "@aws-sdk/client-sqs";
import type { SQSClient } from "@aws-sdk/client-sqs";
import { pino } from "pino";
import { DeleteBatcher } from "./delete-batcher.ts";
import { Leases } from "./leases.ts";

/** A queue that honours only the receipt handles in `valid`, as SQS honours only a message's latest one. */
function queueHonouring(valid: Set<string>) {
  const deleted: string[] = [];
  const client = {
    send: (command: sdk.DeleteMessageBatchCommand) => {
      const entries = command.input.Entries ?? [];
      for (const e of entries) if (valid.has(e.ReceiptHandle ?? "")) deleted.push(e.ReceiptHandle ?? "");
      return Promise.resolve({
        Failed: entries.filter((e) => !valid.has(e.ReceiptHandle ?? "")).map((e) => ({ Id: e.Id, Code: "ReceiptHandleIsInvalid", SenderFault: true })),
      });
    },
  } as unknown as SQSClient;
  return { deleted, sqs: () => Promise.resolve({ client, sdk }) };
}

const message = (id: string, receipt: string) => ({ MessageId: id, ReceiptHandle: receipt, Attributes: { ApproximateReceiveCount: "1" } });

describe("deletes of messages in hand", () => {
  it("refused because a receive under way took the message again: deleted with the receipt handle that receive brings, nothing said", async (t) => {
    const lines: string[] = [];
    const logger = pino({ level: "warn" }, { write: (l: string) => void lines.push(l) });
    const valid = new Set(["r2"]);
    const { deleted, sqs } = queueHonouring(valid);
    const leases = new Leases({ sqs, queueUrl: "q", logger });
    t.after(() => leases.close());
    const [held] = leases.take([message("m1", "r1")], 30);
    // Another loop's long poll has the message (the queue gave it r2), its answer not yet read.
    const landed = leases.receiving();
    const deleter = new DeleteBatcher({ sqs, queueUrl: "q", windowMs: 0, logger });
    const done = deleter.add([held!.lease]);
    await new Promise((r) => setTimeout(r, 20));
    assert.deepEqual(deleted, [], "r1 refused; nothing deleted yet");
    leases.take([message("m1", "r2")], 30);
    landed();
    await done;
    assert.deepEqual(deleted, ["r2"]);
    assert.deepEqual(lines, []);
  });

  it("refused with no receive under way to explain it: said once, and answered", async (t) => {
    const lines: string[] = [];
    const logger = pino({ level: "warn" }, { write: (l: string) => void lines.push(l) });
    const { deleted, sqs } = queueHonouring(new Set());
    const leases = new Leases({ sqs, queueUrl: "q", logger });
    t.after(() => leases.close());
    const [held] = leases.take([message("m1", "r1")], 30);
    await new DeleteBatcher({ sqs, queueUrl: "q", windowMs: 0, logger }).add([held!.lease]);
    assert.deepEqual(deleted, []);
    assert.equal(lines.filter((l) => l.includes("delete failed")).length, 1);
  });
});
