import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { pino } from "pino";
import { serverConnection } from "../clients/kube-connection.ts";
import { startBridge } from "./bridge.ts";
import { loadBridgeConfig } from "./config.ts";
import { TransportError, type QueueTransport } from "./transport.ts";
import { TEST_EVENT_KEY } from "../test/support/event-key.ts";

const topic = "projects/my-project/topics/crdfn-shop-greeting-events";

/** Retries an assertion until it holds, for up to 10 s. */
async function eventually(check: () => void): Promise<void> {
  for (let i = 0; ; i++) {
    try {
      return check();
    } catch (e) {
      if (i > 100) throw e;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

describe("a bridge on Pub/Sub whose topic does not exist", () => {
  it("is not ready, and says so in one line naming the setting", async () => {
    const transport: QueueTransport = {
      noun: "topic",
      maxBatch: 100,
      lingerMs: 0,
      send: () => Promise.reject(new TransportError("Topic not found", { reason: "NOT_FOUND", status: 5, missing: true })),
      exists: () => Promise.resolve(false),
      close: () => Promise.resolve(),
    };
    // An API server that is not there: only the topic is looked at here.
    const bridge = startBridge(loadBridgeConfig({ CRDFN_PUBSUB_TOPIC: topic, CRDFN_RESOURCES: "example.com/v1/greetings", CRDFN_HTTP_PORT: "0" }), {
      eventKey: TEST_EVENT_KEY,
      kubeConfig: serverConnection({ server: "https://127.0.0.1:9" }),
      transport,
      logger: pino({ level: "silent" }),
    });
    try {
      await eventually(() => assert.ok(bridge.readiness().includes(`CRDFN_PUBSUB_TOPIC: the topic ${topic} does not exist`), bridge.readiness().join("\n")));
      assert.equal(bridge.isReady(), false);
    } finally {
      await bridge.stop(0);
    }
  });
});
