import { describe, it } from "node:test";
import assert from "node:assert/strict";
import type { Context, SQSEvent } from "aws-lambda";
import greeting from "../../examples/greeting/operator.ts";
import { lambdaHandler } from "./lambda.ts";

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
