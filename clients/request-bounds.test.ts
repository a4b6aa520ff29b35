import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { GetQueueUrlCommand } from "@aws-sdk/client-sqs";
import { boundedRequests } from "./request-bounds.ts";
import { sqsClient } from "./sqs-client.ts";

describe("bounded AWS requests", () => {
  it("a server that accepts and never answers fails the request once its bound has passed, instead of holding it", { timeout: 60_000 }, async (t) => {
    const hung = createServer(() => {}); // reads each request, answers none
    await new Promise<void>((resolve) => hung.listen(0, "127.0.0.1", resolve));
    t.after(() => {
      hung.closeAllConnections();
      hung.close();
    });
    const { port } = hung.address() as AddressInfo;
    const client = sqsClient(
      { region: "us-east-1", endpoint: `http://127.0.0.1:${port}`, accessKeyId: "x", secretAccessKey: "x" },
      { maxAttempts: 1, requestHandler: boundedRequests(1000, 300) },
    );
    t.after(() => client.destroy());
    await assert.rejects(client.send(new GetQueueUrlCommand({ QueueName: "q" })), /timeout|timed out/i);
  });
});
