// The Cloud Run path's queue, for real: the Pub/Sub emulator (pstest, built from the pinned Go
// module), the bridge's Pub/Sub transport publishing with ordering keys, and the local push
// deliverer POSTing to an HTTP endpoint and to a real functions-framework server. Asserts on
// what arrived where, in which order, and what the dead-letter topic holds.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { v1, type PubSub } from "@google-cloud/pubsub";
import * as ff from "@google-cloud/functions-framework";
import { getTestServer } from "@google-cloud/functions-framework/testing";
import { pubSubPublisher, type PubSubEntry } from "../bridge/pubsub-transport.ts";
import { startLocalPubSub, type LocalPubSub } from "../emulator/pubsub.ts";
import { pubSubRepublisher } from "../functions/adapters/pubsub-republish.ts";
import { startPushDeliverer, type PushDeliverer, type PushRecord } from "../emulator/pubsub-push.ts";
import { createPubSubResources } from "../emulator/pubsub-resources.ts";
import { pubSubClient } from "../clients/pubsub-client.ts";
import { eventually } from "./support/eventually.ts";

interface Arrival {
  key: string;
  body: string;
  attempt: number;
  at: number;
  push: PushBody;
}
interface PushBody {
  message: {
    data: string;
    attributes: Record<string, string>;
    messageId: string;
    message_id: string;
    publishTime: string;
    publish_time: string;
    orderingKey?: string;
  };
  subscription: string;
  deliveryAttempt?: number;
}

/** A push endpoint that records every request, answers after `delayMs`, and refuses what `refuse` says. */
async function recordingEndpoint(refuse: (body: string) => boolean, delayMs = 20) {
  const arrivals: Arrival[] = [];
  const running = new Map<string, number>();
  let mostAtOnceForAKey = 0;
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const push = JSON.parse(Buffer.concat(chunks).toString("utf8")) as PushBody;
      const key = push.message.orderingKey ?? "";
      const body = Buffer.from(push.message.data, "base64").toString("utf8");
      arrivals.push({ key, body, attempt: push.deliveryAttempt ?? 0, at: Date.now(), push });
      if (key) {
        running.set(key, (running.get(key) ?? 0) + 1);
        mostAtOnceForAKey = Math.max(mostAtOnceForAKey, running.get(key)!);
      }
      setTimeout(() => {
        if (key) running.set(key, running.get(key)! - 1);
        res.writeHead(refuse(body) ? 500 : 204).end();
      }, delayMs);
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/`,
    arrivals,
    mostAtOnceForAKey: () => mostAtOnceForAKey,
    bodiesOf: (key: string) => arrivals.filter((a) => a.key === key).map((a) => a.body),
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

/** Everything a pull subscription holds now, acknowledged as it is read (a key's next message comes once its previous is acked). */
async function drain(pubsub: PubSub, subscription: string): Promise<Array<{ body: string; key: string; id: string }>> {
  const client = new v1.SubscriberClient({ ...(await pubsub.getClientConfig()) });
  const out: Array<{ body: string; key: string; id: string }> = [];
  try {
    for (;;) {
      const [res] = await client.pull({ subscription, maxMessages: 100, returnImmediately: true });
      const got = res.receivedMessages ?? [];
      if (got.length === 0) return out;
      for (const rm of got) {
        out.push({ body: Buffer.from(rm.message!.data as Uint8Array).toString("utf8"), key: rm.message!.orderingKey ?? "", id: rm.message!.messageId ?? "" });
      }
      await client.acknowledge({ subscription, ackIds: got.map((rm) => rm.ackId!) });
    }
  } finally {
    await client.close();
  }
}

const seq = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}-${i}`);

describe("Pub/Sub emulator, transport and push deliverer", { timeout: 240_000 }, () => {
  let local: LocalPubSub;
  let pubsub: PubSub;
  const cleanups: Array<() => Promise<void>> = [];

  before(async () => {
    const started = Date.now();
    local = await startLocalPubSub({ log: () => {} });
    pubsub = await pubSubClient({ projectId: local.projectId, emulatorHost: local.host });
    console.log(`# Pub/Sub emulator ${local.version} ready on ${local.host} in ${Date.now() - started} ms`);
  });
  /** The bridge's Pub/Sub publisher, bound to one topic. */
  const publisherTo = (topic: string, options: { timeoutMs?: number } = {}) => {
    const p = pubSubPublisher({ apiEndpoint: local.host, ...options });
    return { publish: (entries: PubSubEntry[]) => p.publish(topic, entries), close: () => p.close() };
  };
  after(async () => {
    for (const c of cleanups.reverse()) await c();
    await pubsub?.close();
    await local?.stop();
  });

  it("delivers rapid publishes in order per ordering key, one request at a time per key, each exactly once", async () => {
    const endpoint = await recordingEndpoint(() => false);
    const res = await createPubSubResources(pubsub, { prefix: "order-", pushEndpoint: endpoint.url, minimumBackoffSeconds: 1, maximumBackoffSeconds: 2 });
    const said: string[] = [];
    const deliverer = await startPushDeliverer({ pubsub, subscription: res.subscription, log: (line) => said.push(`${Date.now()} ${line}`) });
    const transport = publisherTo(res.topic);
    cleanups.push(
      () => deliverer.stop(),
      () => transport.close(),
      () => endpoint.close(),
    );

    // Ten publish calls without waiting for each other: key a in each, b and c in some, two unordered.
    const calls: Array<Promise<unknown[]>> = [];
    for (let i = 0; i < 10; i++) {
      const entries: PubSubEntry[] = [{ body: `a-${i}`, orderingKey: "crontabs.default.a~1", attributes: { seq: String(i) } }];
      if (i < 4) entries.push({ body: `b-${i}`, orderingKey: "crontabs.default.b~2" });
      if (i < 3) entries.push({ body: `c-${i}`, orderingKey: "crontabs.other.c~3" });
      calls.push(transport.publish(entries));
    }
    calls.push(
      transport.publish([
        { body: "u-0", orderingKey: "" },
        { body: "u-1", orderingKey: "" },
      ]),
    );
    const outcomes = (await Promise.all(calls)).flat();
    assert.equal(outcomes.length, 19);
    assert.ok(
      outcomes.every((o) => (o as { ok: boolean }).ok),
      JSON.stringify(outcomes),
    );

    // What arrived and what the deliverer said, should the count stop short: the next look starts there.
    const story = () =>
      `acked ${deliverer.counts.acked} of 19, refused ${deliverer.counts.refused}; arrivals ${JSON.stringify(endpoint.arrivals.map((a) => [a.body, a.attempt, a.at]))}; deliverer: ${JSON.stringify(said)}`;
    await eventually(() => assert.equal(deliverer.counts.acked, 19, story()), { timeoutMs: 60_000 });
    assert.deepEqual(endpoint.bodiesOf("crontabs.default.a~1"), seq("a", 10));
    assert.deepEqual(endpoint.bodiesOf("crontabs.default.b~2"), seq("b", 4));
    assert.deepEqual(endpoint.bodiesOf("crontabs.other.c~3"), seq("c", 3));
    assert.deepEqual(endpoint.bodiesOf("").sort(), ["u-0", "u-1"]);
    assert.equal(endpoint.mostAtOnceForAKey(), 1, "never two requests of one ordering key at once");
    assert.equal(deliverer.counts.refused, 0);

    // The request is Pub/Sub's wrapped push body.
    const first = endpoint.arrivals.find((a) => a.body === "a-0")!.push;
    assert.equal(first.subscription, res.subscription);
    assert.equal(first.message.orderingKey, "crontabs.default.a~1");
    assert.deepEqual(first.message.attributes, { seq: "0" });
    assert.equal(first.message.messageId, first.message.message_id);
    assert.equal(first.message.publishTime, first.message.publish_time);
    assert.ok(!Number.isNaN(Date.parse(first.message.publishTime)));
    assert.equal(first.deliveryAttempt, 1);

    assert.deepEqual(await drain(pubsub, res.deadLetterSubscription), [], "nothing dead-lettered");
  });

  it("dead-letters a message refused 5 times, with backoff between attempts; its key waits for it, then carries on", async () => {
    const endpoint = await recordingEndpoint((body) => body === "p-1");
    const res = await createPubSubResources(pubsub, { prefix: "poison-", pushEndpoint: endpoint.url, minimumBackoffSeconds: 1, maximumBackoffSeconds: 2 });
    const pushes: PushRecord[] = [];
    const deliverer = await startPushDeliverer({ pubsub, subscription: res.subscription, onPush: (p) => pushes.push(p) });
    const transport = publisherTo(res.topic);
    cleanups.push(
      () => deliverer.stop(),
      () => transport.close(),
      () => endpoint.close(),
    );

    const outcomes = await transport.publish([
      ...seq("p", 4).map((body) => ({ body, orderingKey: "p" })),
      ...seq("q", 3).map((body) => ({ body, orderingKey: "q" })),
    ]);
    assert.ok(outcomes.every((o) => o.ok));

    await eventually(() => assert.deepEqual(endpoint.bodiesOf("p"), ["p-0", "p-1", "p-1", "p-1", "p-1", "p-1", "p-2", "p-3"]), { timeoutMs: 90_000 });
    assert.deepEqual(endpoint.bodiesOf("q"), seq("q", 3));
    const poisoned = endpoint.arrivals.filter((a) => a.body === "p-1");
    assert.deepEqual(
      poisoned.map((a) => a.attempt),
      [1, 2, 3, 4, 5],
    );
    // The retry policy's minimum backoff (1 s) separates attempts (a lower bound: load only adds).
    for (let i = 1; i < poisoned.length; i++) assert.ok(poisoned[i]!.at - poisoned[i - 1]!.at >= 900, `attempt ${i + 1} came too soon`);

    const dead = await eventually(async () => {
      const got = await drain(pubsub, res.deadLetterSubscription);
      assert.equal(got.length, 1);
      return got;
    });
    assert.deepEqual(
      dead.map(({ body, key }) => ({ body, key })),
      [{ body: "p-1", key: "p" }],
    );
    // The endpoint has answered p-3; the deliverer counts its acknowledgement once the emulator has taken it.
    await eventually(() => assert.equal(deliverer.counts.acked, 6, "everything else acknowledged once"));
    assert.equal(deliverer.counts.refused, 5);
    // What the benchmark counts: a record per request the endpoint received, with its attempt and answer.
    assert.equal(pushes.length, endpoint.arrivals.length);
    assert.deepEqual(
      pushes.filter((p) => !p.acked).map((p) => p.attempt),
      [1, 2, 3, 4, 5],
    );
    assert.ok(pushes.filter((p) => p.acked).every((p) => p.attempt === 1));
    // "p-1" and its key "p": 3 bytes of data, 1 of ordering key, no attributes.
    assert.ok(pushes.every((p) => p.bytes === 4 && p.ms > 0));
  });

  it("after a burst larger than its requests in flight, delivers what is published later (the pull loop is woken when room frees)", async () => {
    const endpoint = await recordingEndpoint(() => false);
    const res = await createPubSubResources(pubsub, { prefix: "burst-", pushEndpoint: endpoint.url });
    const deliverer = await startPushDeliverer({ pubsub, subscription: res.subscription, maxOutstanding: 2 });
    const transport = publisherTo(res.topic);
    cleanups.push(
      () => deliverer.stop(),
      () => transport.close(),
      () => endpoint.close(),
    );
    assert.ok((await transport.publish(seq("k", 8).map((body) => ({ body, orderingKey: body })))).every((o) => o.ok));
    await eventually(() => assert.equal(deliverer.counts.acked, 8));
    assert.ok((await transport.publish([{ body: "later", orderingKey: "later" }])).every((o) => o.ok));
    await eventually(() => assert.deepEqual(endpoint.bodiesOf("later"), ["later"]), { timeoutMs: 30_000 });
  });

  it("transport: a failed ordered publish is reported per entry and its key resumed, so the retry goes through in order", async () => {
    const topic = `projects/${local.projectId}/topics/late-events`;
    const transport = publisherTo(topic, { timeoutMs: 10_000 });
    cleanups.push(() => transport.close());
    const entries = seq("l", 3).map((body) => ({ body, orderingKey: "late" }));

    const failed = await transport.publish(entries);
    assert.deepEqual(
      failed.map((o) => (o.ok ? "ok" : o.code)),
      [5, 5, 5],
      "NOT_FOUND for each entry while the topic is missing",
    );

    await pubsub.topic(topic).create();
    const [sub] = await pubsub.topic(topic).createSubscription("late-events-pull", { enableMessageOrdering: true });
    const retried = await transport.publish(entries);
    assert.ok(
      retried.every((o) => o.ok),
      JSON.stringify(retried),
    );
    const got = await eventually(async () => {
      const all = await drain(pubsub, sub.name);
      assert.equal(all.length, 3);
      return all;
    });
    assert.deepEqual(
      got.map((m) => m.body),
      ["l-0", "l-1", "l-2"],
    );
  });

  it("CloudEvent mode: a real functions-framework CloudEvent function receives messagePublished events in order, a throw is retried", async () => {
    const seen: Array<{ type: string; source: string; key: string; body: string; attempt: number }> = [];
    let refusedOnce = false;
    ff.cloudEvent("crdfnPubSubProbe", (ce: ff.CloudEvent<PushBody>) => {
      const body = Buffer.from(ce.data!.message.data, "base64").toString("utf8");
      seen.push({ type: ce.type, source: ce.source, key: ce.data!.message.orderingKey ?? "", body, attempt: ce.data!.deliveryAttempt ?? 0 });
      if (body === "k-1" && !refusedOnce) {
        refusedOnce = true;
        throw new Error("not yet");
      }
    });
    const server = getTestServer("crdfnPubSubProbe");
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
    const res = await createPubSubResources(pubsub, { prefix: "ce-", minimumBackoffSeconds: 1, maximumBackoffSeconds: 1 });
    const deliverer: PushDeliverer = await startPushDeliverer({ pubsub, subscription: res.subscription, endpoint: url, format: "cloudevent" });
    const transport = publisherTo(res.topic);
    cleanups.push(
      () => deliverer.stop(),
      () => transport.close(),
      () => new Promise<void>((r) => server.close(() => r())),
    );

    assert.ok((await transport.publish(seq("k", 3).map((body) => ({ body, orderingKey: "k" })))).every((o) => o.ok));
    await eventually(() => assert.equal(deliverer.counts.acked, 3), { timeoutMs: 60_000 });
    assert.deepEqual(
      seen.map((s) => `${s.body}#${s.attempt}`),
      ["k-0#1", "k-1#1", "k-1#2", "k-2#1"],
    );
    assert.ok(seen.every((s) => s.type === "google.cloud.pubsub.topic.v1.messagePublished" && s.key === "k"));
    assert.ok(seen.every((s) => s.source === `//pubsub.googleapis.com/${res.topic}`));
  });

  it("a function's re-send goes into the same ordering key, behind what waits there, with its attributes", async () => {
    const endpoint = await recordingEndpoint(() => false);
    const res = await createPubSubResources(pubsub, { prefix: "resend-", pushEndpoint: endpoint.url, minimumBackoffSeconds: 1, maximumBackoffSeconds: 2 });
    const deliverer = await startPushDeliverer({ pubsub, subscription: res.subscription });
    const republish = pubSubRepublisher({ topic: res.topic, emulatorHost: local.host });
    const transport = publisherTo(res.topic);
    cleanups.push(
      () => deliverer.stop(),
      () => republish.close(),
      () => transport.close(),
      () => endpoint.close(),
    );
    assert.ok((await transport.publish([{ body: "r-0", orderingKey: "r" }])).every((o) => o.ok));
    await republish({ body: "r-0 again", orderingKey: "r", attributes: { "crdfn-deferrals": "1" } });
    await eventually(() => assert.deepEqual(endpoint.bodiesOf("r"), ["r-0", "r-0 again"]), { timeoutMs: 30_000 });
    assert.deepEqual(endpoint.arrivals.find((a) => a.body === "r-0 again")!.push.message.attributes, { "crdfn-deferrals": "1" });
  });
});
