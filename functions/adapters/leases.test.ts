import { describe, it } from "node:test";
import assert from "node:assert/strict";
import * as sdk from "@aws-sdk/client-sqs";
import type { Message, SQSClient } from "@aws-sdk/client-sqs";
import { pino } from "pino";
import { Leases } from "./leases.ts";

/** A queue client that records each visibility extension and refuses the receipt handles in `refuse`. */
function recordingSqs(refuse = new Set<string>()) {
  const extended: string[][] = [];
  const client = {
    send: (command: sdk.ChangeMessageVisibilityBatchCommand) => {
      const entries = command.input.Entries ?? [];
      extended.push(entries.map((e) => e.ReceiptHandle ?? ""));
      return Promise.resolve({
        Failed: entries.filter((e) => refuse.has(e.ReceiptHandle ?? "")).map((e) => ({ Id: e.Id, Code: "ReceiptHandleIsInvalid", SenderFault: true })),
      });
    },
  } as unknown as SQSClient;
  return { extended, sqs: () => Promise.resolve({ client, sdk }) };
}

const message = (id: string, receipt: string, group?: string): Message => ({
  MessageId: id,
  ReceiptHandle: receipt,
  Attributes: { ApproximateReceiveCount: "1", ...(group ? { MessageGroupId: group } : {}) },
});

describe("leases of the messages in hand", () => {
  it("a message received again while in hand is not handed out twice; its new receipt handle is the one extended", async () => {
    const { extended, sqs } = recordingSqs();
    const leases = new Leases({ sqs, queueUrl: "q", logger: pino({ level: "silent" }) });
    const [first] = leases.take([message("m1", "r1")], 0.03);
    assert.deepEqual(
      leases.take([message("m1", "r2"), message("m2", "s1")], 0.03).map((t) => t.message.MessageId),
      ["m2"],
    );
    assert.equal(first!.lease.receipt, "r2");
    await new Promise((r) => setTimeout(r, 30));
    await leases.extensionsLanded();
    assert.deepEqual(extended.at(-1), ["r2", "s1"]);
    leases.close();
  });

  it("stays in hand, and extended, until released; then no longer", async () => {
    const { extended, sqs } = recordingSqs();
    const leases = new Leases({ sqs, queueUrl: "q", logger: pino({ level: "silent" }) });
    const [t] = leases.take([message("m1", "r1")], 0.03);
    await new Promise((r) => setTimeout(r, 25));
    assert.ok(extended.length > 0, "extended while in hand");
    leases.release(t!.lease);
    await t!.lease.released;
    const after = extended.length;
    await new Promise((r) => setTimeout(r, 40));
    assert.equal(extended.length, after, "not extended once released");
    assert.equal(leases.size, 0);
  });

  it("an object's message waits for the handling of the one of its group taken earlier, not for others", async () => {
    const { sqs } = recordingSqs();
    const leases = new Leases({ sqs, queueUrl: "q", logger: pino({ level: "silent" }) });
    const [a] = leases.take([message("a", "ra", "g")], 30);
    const [b, other] = leases.take([message("b", "rb", "g"), message("c", "rc", "h")], 30);
    let bStarted = false;
    const turn = leases.turn(b!.lease).then(() => (bStarted = true));
    await leases.turn(other!.lease);
    await new Promise((r) => setImmediate(r));
    assert.equal(bStarted, false, "b waits for a");
    a!.lease.endHandling();
    await turn;
    assert.equal(bStarted, true);
    leases.close();
  });

  it("a refused extension is said only if no new receipt handle came before the next one", async () => {
    const lines: string[] = [];
    const logger = pino({ level: "warn" }, { write: (l: string) => void lines.push(l) });
    const { sqs } = recordingSqs(new Set(["r1", "s1"]));
    const leases = new Leases({ sqs, queueUrl: "q", logger });
    const [m1] = leases.take([message("m1", "r1"), message("m2", "s1")], 0.06);
    await new Promise((r) => setTimeout(r, 25));
    await leases.extensionsLanded();
    // m1 comes back to one of this poller's own receives: its refusal was no one else's doing.
    leases.take([message("m1", "r2")], 0.06);
    await new Promise((r) => setTimeout(r, 25));
    await leases.extensionsLanded();
    leases.release(m1!.lease);
    leases.close();
    assert.ok(
      lines.some((l) => /"messageId":"m2".*another consumer/.test(l)),
      lines.join(""),
    );
    assert.ok(!lines.some((l) => l.includes('"messageId":"m1"')), lines.join(""));
  });
});
