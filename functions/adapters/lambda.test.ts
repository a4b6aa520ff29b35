import { describe, it } from "node:test";
import assert from "node:assert/strict";
import type { Context, SQSEvent } from "aws-lambda";
import greeting from "../../examples/greeting/operator.ts";
import { lambdaHandler } from "./lambda.ts";
import { fakeRuntime } from "../../test/support/fake-runtime.ts";

describe("Lambda handler", () => {
  it("with a bad setting: one line naming it, and the whole batch returned to the queue", async (t) => {
    const lines: string[] = [];
    t.mock.method(console, "error", (line: string) => void lines.push(line));
    const handler = lambdaHandler(greeting, { env: { CRDFN_KUBE_AUTH: "magic" } });
    const event = { Records: [{ messageId: "m1", body: "{}", eventSourceARN: "arn:aws:sqs:us-east-1:0:q.fifo" }] } as unknown as SQSEvent;
    const response = await handler(event, {} as Context);
    assert.deepEqual(response.batchItemFailures, [{ itemIdentifier: "m1" }]);
    assert.equal(lines.length, 1);
    assert.match(lines[0] ?? "", /^invalid setting CRDFN_KUBE_AUTH: /);
  });
});

describe("Lambda handler on a FIFO batch", () => {
  const record = (id: string, group: string) => ({
    messageId: id,
    body: id,
    receiptHandle: id,
    attributes: { MessageGroupId: group, ApproximateReceiveCount: "1" },
    eventSourceARN: "arn:aws:sqs:us-east-1:0:q.fifo",
  });
  it("groups in order; behind a failure the rest of its group is superseded, not failed; a malformed message holds nothing back", async () => {
    const seen: string[] = [];
    const results: Record<string, "retry" | "dead-letter"> = { a1: "retry", c1: "dead-letter" };
    const runtime = fakeRuntime((m) => {
      seen.push(m.body);
      const result = results[m.body];
      return result ? { result, detail: "boom", apiCalls: 1 } : { result: "success" as const, apiCalls: 1 };
    });
    const handler = lambdaHandler(greeting, { runtime });
    const event = { Records: [record("a1", "A"), record("b1", "B"), record("a2", "A"), record("c1", "C"), record("c2", "C")] } as unknown as SQSEvent;
    const response = await handler(event, {} as Context);
    assert.deepEqual(response.batchItemFailures.map((f) => f.itemIdentifier).sort(), ["a1", "c1"]);
    assert.ok(!seen.includes("a2"), "a2 was never tried: a1's retry reconciles the object");
    assert.ok(seen.indexOf("c1") < seen.indexOf("c2"), "in order within a group");
  });

  it("a record not yet started when less than a request's timeout is left of the invocation is returned untried, not cut off", async () => {
    // Each reconcile takes 12 s of a 30 s function timeout: a2, next in its group, would start with 6 s left.
    let remainingMs = 30_000;
    const seen: string[] = [];
    const runtime = fakeRuntime((m) => {
      seen.push(m.body);
      remainingMs -= 12_000;
      return { result: "success" as const, apiCalls: 1 };
    });
    const handler = lambdaHandler(greeting, { runtime });
    const event = { Records: [record("a1", "A"), record("b1", "B"), record("a2", "A")] } as unknown as SQSEvent;
    const response = await handler(event, { getRemainingTimeInMillis: () => remainingMs } as Context);
    assert.deepEqual(seen.sort(), ["a1", "b1"]);
    assert.deepEqual(
      response.batchItemFailures.map((f) => f.itemIdentifier),
      ["a2"],
    );
  });
});
