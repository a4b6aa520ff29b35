// The Queue operator without a cluster or a cloud: its names, its pure reconcile and its grant.
// (Its effects and finalize, against a real queue server: test/queue-dev.test.ts.)
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { reconcileContext, testObject } from "crdfn/testing";
import queue, { attributesOf, configMapName, QUEUE_PREFIX, queueName } from "./operator.ts";

describe("Queue", () => {
  it("names each object's queue after it, uniquely and within SQS's limits", () => {
    const a = testObject(queue, { metadata: { name: "orders", uid: "8d4a1c2e-0000-4000-8000-000000000001" }, spec: {} });
    assert.equal(queueName(a), "crdfn-queue-default-orders-8d4a1c2e0000");
    const long = testObject(queue, { metadata: { name: `a.${"b".repeat(250)}`, uid: "8d4a1c2e-0000-4000-8000-000000000002" }, spec: {} });
    assert.match(queueName(long), /^[A-Za-z0-9_-]{1,80}$/);
    assert.ok(queueName(long).startsWith(QUEUE_PREFIX));
  });

  it("asks SQS for the spec's attributes, with the schema's defaults", () => {
    assert.deepEqual(attributesOf(testObject(queue, { metadata: { name: "q" }, spec: {} }).spec), {
      VisibilityTimeout: "30",
      MessageRetentionPeriod: "345600",
    });
  });

  it("wires the URL and ARN effects recorded into a ConfigMap, and wants nothing before", () => {
    const before = testObject(queue, { metadata: { name: "orders" }, spec: {} });
    assert.deepEqual(queue.reconcile(before, reconcileContext(queue)), {});
    const made = testObject(queue, { metadata: { name: "orders" }, spec: {}, status: { url: "http://sqs/q", arn: "arn:aws:sqs:us-east-1:1:q" } });
    assert.deepEqual(queue.reconcile(made, reconcileContext(queue)).children, [
      { apiVersion: "v1", kind: "ConfigMap", metadata: { name: configMapName("orders") }, data: { url: "http://sqs/q", arn: "arn:aws:sqs:us-east-1:1:q" } },
    ]);
  });

  it("may manage only its own queues", () => {
    assert.deepEqual(
      queue.cloud?.aws?.flatMap((p) => p.resources),
      ["arn:${AWS::Partition}:sqs:${AWS::Region}:${AWS::AccountId}:crdfn-queue-*"],
    );
  });
});
