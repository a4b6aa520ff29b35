import { describe, it } from "node:test";
import assert from "node:assert/strict";
import type { CloudEvent } from "@google-cloud/functions-framework";
import { messageOf } from "./http.ts";

const ce = (data: unknown) => ({ specversion: "1.0", id: "ce-1", source: "s", type: "t", data }) as unknown as CloudEvent<unknown>;

describe("CloudEvent unwrapping", () => {
  it("reads a Pub/Sub message", () => {
    const m = messageOf(ce({ message: { data: Buffer.from('{"v":1}').toString("base64"), messageId: "p1", attributes: { "crdfn-due-at": "5" } } }));
    assert.deepEqual(m, { id: "p1", body: '{"v":1}', attributes: { "crdfn-due-at": "5" } });
  });
  it("reads an SQS message (API shape) and a Lambda-style record", () => {
    const api = messageOf(ce({ MessageId: "s1", Body: "{}", MessageAttributes: { "crdfn-due-at": { StringValue: "7", DataType: "Number" } }, Attributes: { ApproximateReceiveCount: "3" } }));
    assert.deepEqual(api, { id: "s1", body: "{}", attributes: { "crdfn-due-at": "7" }, receiveCount: 3 });
    const record = messageOf(ce({ messageId: "r1", body: "{}", messageAttributes: {}, attributes: { ApproximateReceiveCount: "1" } }));
    assert.deepEqual(record, { id: "r1", body: "{}", attributes: {}, receiveCount: 1 });
  });
  it("treats any other payload as the key event itself", () => {
    assert.deepEqual(messageOf(ce({ v: 1, name: "x" })), { id: "ce-1", body: '{"v":1,"name":"x"}' });
  });
});
