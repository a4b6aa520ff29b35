import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import { pubSubTransport } from "./pubsub-transport.ts";

describe("Pub/Sub transport", () => {
  it("refuses a topic that is not a full name, in one line naming the setting", () => {
    assert.throws(() => pubSubTransport({ topic: "crdfn-events" }), {
      message: "Pub/Sub transport: topic: a full topic name, projects/<project>/topics/<topic>",
    });
  });

  it("does not load the Pub/Sub client library until it publishes", async () => {
    const transport = pubSubTransport({ topic: "projects/p/topics/t", apiEndpoint: "127.0.0.1:1" });
    const loaded = () => Object.keys(createRequire(import.meta.url).cache).some((f) => f.includes("/@google-cloud/pubsub/"));
    assert.equal(loaded(), false);
    await transport.close();
    assert.equal(loaded(), false);
    await import("@google-cloud/pubsub");
    assert.equal(loaded(), true, "the check sees the library once it is loaded");
  });
});
