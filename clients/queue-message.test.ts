import { describe, it } from "node:test";
import assert from "node:assert/strict";
import type { CloudEvent } from "@google-cloud/functions-framework";
import type { SQSRecord } from "aws-lambda";
import { fromCloudEvent, fromLambdaRecord, fromSqsMessage } from "./queue-message.ts";

const ce = (data: unknown) => ({ specversion: "1.0", id: "ce-1", source: "s", type: "t", data }) as unknown as CloudEvent<unknown>;

describe("a queue message from a CloudEvent", () => {
  it("reads a Pub/Sub message", () => {
    const m = fromCloudEvent(ce({ message: { data: Buffer.from('{"v":1}').toString("base64"), messageId: "p1", attributes: { "crdfn-due-at": "5" } } }));
    assert.deepEqual(m, { id: "p1", body: '{"v":1}', attributes: { "crdfn-due-at": "5" } });
    const pushed = fromCloudEvent(
      ce({
        message: { data: Buffer.from("{}").toString("base64"), message_id: "p2", orderingKey: "k~1" },
        subscription: "projects/p/subscriptions/s",
        deliveryAttempt: 3,
      }),
    );
    assert.deepEqual(pushed, { id: "p2", body: "{}", attributes: {}, receiveCount: 3, stream: "k~1" });
  });
  it("reads an SQS message (API shape) and a Lambda-style record", () => {
    const api = fromCloudEvent(
      ce({
        MessageId: "s1",
        Body: "{}",
        MessageAttributes: { "crdfn-due-at": { StringValue: "7", DataType: "Number" } },
        Attributes: { ApproximateReceiveCount: "3" },
      }),
    );
    assert.deepEqual(api, { id: "s1", body: "{}", attributes: { "crdfn-due-at": "7" }, receiveCount: 3 });
    const record = fromCloudEvent(ce({ messageId: "r1", body: "{}", messageAttributes: {}, attributes: { ApproximateReceiveCount: "1" } }));
    assert.deepEqual(record, { id: "r1", body: "{}", attributes: {}, receiveCount: 1 });
  });
  it("treats any other payload as the key event itself", () => {
    assert.deepEqual(fromCloudEvent(ce({ v: 1, name: "x" })), { id: "ce-1", body: '{"v":1,"name":"x"}' });
  });
});

describe("a queue message from the SQS SDK and from a Lambda record", () => {
  it("keeps string attributes, drops binary ones, and reads the receive count", () => {
    const sdk = fromSqsMessage({
      MessageId: "s1",
      Body: "{}",
      MessageAttributes: { "crdfn-due-at": { StringValue: "7", DataType: "Number" }, blob: { BinaryValue: new Uint8Array([1]), DataType: "Binary" } },
      Attributes: { ApproximateReceiveCount: "4" },
    });
    assert.deepEqual(sdk, { id: "s1", body: "{}", attributes: { "crdfn-due-at": "7" }, receiveCount: 4 });
    const record = fromLambdaRecord({
      messageId: "r1",
      body: "{}",
      messageAttributes: { "crdfn-due-at": { stringValue: "9", dataType: "Number" } },
      attributes: { ApproximateReceiveCount: "2" },
    } as unknown as SQSRecord);
    assert.deepEqual(record, { id: "r1", body: "{}", attributes: { "crdfn-due-at": "9" }, receiveCount: 2 });
  });

  it("counts a message whose source does not say as a first delivery", () => {
    assert.deepEqual(fromSqsMessage({ MessageId: "s2", Body: "b" }), { id: "s2", body: "b", attributes: {}, receiveCount: 1 });
  });
});
