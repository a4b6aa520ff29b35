import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { ACK_STATUSES, MESSAGE_PUBLISHED, pushRequest, retryDelaySeconds, retryPolicyOf } from "./pubsub-push-request.ts";

const received = {
  ackId: "m7",
  deliveryAttempt: 3,
  message: {
    data: Buffer.from('{"v":1}'),
    attributes: { type: "MODIFIED" },
    messageId: "m7",
    orderingKey: "crontabs.default.a~1",
    publishTime: { seconds: "1700000000", nanos: 123_456_789 },
  },
};
const sub = "projects/p/subscriptions/s";
const topic = "projects/p/topics/t";

describe("push request", () => {
  it("is Pub/Sub's wrapped push body: base64 data, both spellings of id and time, key, delivery attempt", () => {
    const { headers, body } = pushRequest(received, sub, topic, "push");
    assert.deepEqual(headers, { "content-type": "application/json" });
    assert.deepEqual(JSON.parse(body), {
      message: {
        data: Buffer.from('{"v":1}').toString("base64"),
        attributes: { type: "MODIFIED" },
        messageId: "m7",
        message_id: "m7",
        publishTime: "2023-11-14T22:13:20.123Z",
        publish_time: "2023-11-14T22:13:20.123Z",
        orderingKey: "crontabs.default.a~1",
      },
      subscription: sub,
      deliveryAttempt: 3,
    });
  });

  it("leaves out an empty ordering key and a delivery attempt the subscription does not count", () => {
    const { body } = pushRequest({ ackId: "m1", message: { data: Buffer.from("x"), messageId: "m1" } }, sub, topic, "push");
    const push = JSON.parse(body) as { message: Record<string, unknown>; deliveryAttempt?: number };
    assert.equal("orderingKey" in push.message, false);
    assert.equal(push.deliveryAttempt, undefined);
    assert.deepEqual(push.message.attributes, {});
  });

  it("as a CloudEvent, carries the same body with binary-mode messagePublished headers about the topic", () => {
    const ce = pushRequest(received, sub, topic, "cloudevent");
    assert.equal(ce.body, pushRequest(received, sub, topic, "push").body);
    assert.deepEqual(ce.headers, {
      "content-type": "application/json",
      "ce-specversion": "1.0",
      "ce-id": "m7",
      "ce-source": "//pubsub.googleapis.com/projects/p/topics/t",
      "ce-type": MESSAGE_PUBLISHED,
      "ce-time": "2023-11-14T22:13:20.123Z",
    });
  });

  it("acknowledges on 102, 200, 201, 202 and 204 only", () => {
    assert.deepEqual(
      [...ACK_STATUSES].sort((a, b) => a - b),
      [102, 200, 201, 202, 204],
    );
    for (const refused of [203, 301, 400, 429, 500, 503]) assert.equal(ACK_STATUSES.has(refused), false);
  });
});

describe("retry policy", () => {
  it("doubles from the minimum backoff per attempt, capped at the maximum", () => {
    const policy = { minimumBackoffSeconds: 1, maximumBackoffSeconds: 10 };
    assert.deepEqual(
      [1, 2, 3, 4, 5, 6].map((n) => retryDelaySeconds(policy, n)),
      [1, 2, 4, 8, 10, 10],
    );
  });

  it("redelivers at once without a policy", () => {
    assert.equal(retryDelaySeconds(undefined, 4), 0);
  });

  it("reads the subscription's durations, with Pub/Sub's defaults (10 s, 600 s) for a missing bound", () => {
    assert.deepEqual(retryPolicyOf({ retryPolicy: { minimumBackoff: { seconds: "2", nanos: 500_000_000 }, maximumBackoff: { seconds: 30 } } }), {
      minimumBackoffSeconds: 2.5,
      maximumBackoffSeconds: 30,
    });
    assert.deepEqual(retryPolicyOf({ retryPolicy: {} }), { minimumBackoffSeconds: 10, maximumBackoffSeconds: 600 });
    assert.equal(retryPolicyOf({}), undefined);
  });
});
