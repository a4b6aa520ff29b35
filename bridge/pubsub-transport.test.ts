import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import { pubSubPublisher, pubSubTransport, topicNameSchema, type PubSubPublisher } from "./pubsub-transport.ts";
import { TransportError } from "./transport.ts";

/** A publisher that answers each entry as `answer` says. */
const answering = (answer: (i: number) => { ok: true; messageId: string } | { ok: false; error: string; code?: number }): PubSubPublisher => ({
  publish: (_topic, entries) => Promise.resolve(entries.map((_e, i) => answer(i))),
  topicExists: () => Promise.resolve(true),
  close: () => Promise.resolve(),
});
const message = (n: number) => ({ body: `{"n":${n}}`, stream: `s${n}`, deduplicationId: `d${n}`, cluster: "c" });

describe("Pub/Sub transport", () => {
  it("takes only full topic names", () => {
    assert.equal(topicNameSchema.safeParse("crdfn-events").success, false);
    assert.equal(topicNameSchema.safeParse("projects/crdfn-local/topics/greeting-events").success, true);
  });

  it("does not load the Pub/Sub client library until it publishes", async () => {
    const publisher = pubSubPublisher({ apiEndpoint: "127.0.0.1:1" });
    const loaded = () => Object.keys(createRequire(import.meta.url).cache).some((f) => f.includes("/@google-cloud/pubsub/"));
    assert.equal(loaded(), false);
    await publisher.close();
    assert.equal(loaded(), false);
    await import("@google-cloud/pubsub");
    assert.equal(loaded(), true, "the check sees the library once it is loaded");
  });

  it("reports each entry; a batch refused alike is a failed request, NOT_FOUND a missing topic", async () => {
    const some = pubSubTransport(answering((i) => (i === 1 ? { ok: false, error: "no", code: 8 } : { ok: true, messageId: String(i) })));
    assert.deepEqual(await some.send("projects/p/topics/t", [message(0), message(1)]), [
      { ok: true },
      { ok: false, reason: "RESOURCE_EXHAUSTED", missing: false },
    ]);
    const none = pubSubTransport(answering(() => ({ ok: false, error: "Topic not found", code: 5 })));
    await assert.rejects(
      none.send("projects/p/topics/t", [message(0), message(1)]),
      (e: unknown) => e instanceof TransportError && e.missing && e.reason === "NOT_FOUND",
    );
  });
});
