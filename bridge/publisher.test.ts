import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { pino } from "pino";
import { Registry } from "prom-client";
import { MAX_EVENT_BYTES, type KeyEvent } from "../core/event.ts";
import { verifyKeyEvent } from "../core/event-auth.ts";
import { createBridgeMetrics } from "./metrics.ts";
import { Publisher, START_LINGER_MS } from "./publisher.ts";
import type { QueueTransport, SendResult } from "./transport.ts";
import { TEST_EVENT_KEY, testKeyring } from "../test/support/event-key.ts";
import { fakeClock, type FakeClock } from "../test/support/fake-clock.ts";

/** A queue that records each batch it is sent and answers only when the test says so. */
function heldQueue(lingerMs = 0) {
  const batches: string[][] = [];
  const answers: Array<() => void> = [];
  const transport: QueueTransport = {
    noun: "queue",
    maxBatch: 10,
    lingerMs,
    send(_destination, messages) {
      batches.push(messages.map((m) => (JSON.parse(m.body) as KeyEvent).name));
      return new Promise<SendResult[]>((resolve) => answers.push(() => resolve(messages.map(() => ({ ok: true })))));
    },
    exists: () => Promise.resolve(true),
    close: () => Promise.resolve(),
  };
  return { transport, batches, answerNext: () => answers.shift()?.(), waiting: () => answers.length };
}

const event = (name: string): KeyEvent => ({
  v: 1,
  cluster: "c",
  group: "example.com",
  version: "v1",
  plural: "greetings",
  kind: "Greeting",
  namespace: "default",
  name,
  uid: `uid-${name}`,
  resourceVersion: "1",
  generation: 1,
  type: "MODIFIED",
  reason: "watch",
  observedAt: new Date(0).toISOString(),
});

/** One turn of the event loop: the queue's answer, and the publisher's reaction to it, run. */
const settle = () => new Promise((r) => setImmediate(r));

/** Answers every request the queue holds, and those the answers set off, until none waits. */
async function answerEverything(queue: ReturnType<typeof heldQueue>): Promise<void> {
  for (await settle(); queue.waiting() > 0; await settle()) queue.answerNext();
}

/** A publisher on `queue`, with a clock that moves only when the test says so. */
function publisherOn(queue: ReturnType<typeof heldQueue>, clock: FakeClock = fakeClock()): Publisher {
  return new Publisher({
    transport: queue.transport,
    destinationOf: () => "q.fifo",
    maxPending: 100,
    concurrency: 4,
    logger: pino({ level: "silent" }),
    metrics: createBridgeMetrics(new Registry()),
    now: () => clock.nowMs(),
    timers: clock.timers,
    eventKey: TEST_EVENT_KEY,
  });
}

describe("publisher batching", () => {
  it("sends at once while nothing is in flight, and gathers what arrives meanwhile into one batch", async () => {
    const queue = heldQueue();
    const publisher = publisherOn(queue);
    await publisher.offer("a", event("a"), "watch");
    assert.deepEqual(queue.batches, [["a"]], "an idle queue gets the first event without waiting");
    for (const n of ["b", "c", "d"]) await publisher.offer(n, event(n), "watch");
    assert.deepEqual(queue.batches, [["a"]], "part-filled batches wait for the one in flight");
    queue.answerNext();
    await settle();
    assert.deepEqual(queue.batches, [["a"], ["b", "c", "d"]]);
    queue.answerNext();
    assert.equal(await publisher.flush(1000), true);
  });

  it("keeps every slot busy with full batches (an initial sync)", async () => {
    const queue = heldQueue();
    const publisher = publisherOn(queue);
    for (let i = 0; i < 35; i++) await publisher.offer(`o${i}`, event(`o${i}`), "list");
    assert.deepEqual(
      queue.batches.map((b) => b.length),
      [1, 10, 10, 10],
      "the first event went alone; then three full batches beside it, the last 4 wait",
    );
    while (publisher.pendingCount > 0) {
      queue.answerNext();
      await settle();
    }
    assert.equal(await publisher.flush(0), true, "nothing left to send");
    assert.equal(queue.batches.flat().length, 35, "every object published once");
  });
});

describe("publisher linger", () => {
  it("a burst after a quiet spell goes at once; a steady stream faster than one per linger shares requests; a stop waits for nothing", async () => {
    const queue = heldQueue(40);
    const clock = fakeClock();
    const publisher = publisherOn(queue, clock);
    const answerAll = () => answerEverything(queue);
    // A change every 20 ms (50 changes/s), each request answered at once, in 10 ms steps.
    const names = "abcdefghijklmnop".split("");
    for (const [i, n] of names.entries()) {
      if (i > 0) {
        clock.advance(10);
        await answerAll();
        clock.advance(10);
      }
      await publisher.offer(n, event(n), "watch");
      await answerAll();
    }
    clock.advance(40);
    await answerAll();
    assert.deepEqual(queue.batches.flat(), names, "every change sent once, in order");
    assert.deepEqual(queue.batches.slice(0, 4), [["a"], ["b"], ["c"], ["d"]], "the first few at once, one per request");
    assert.deepEqual(
      queue.batches.slice(-3),
      [
        ["k", "l"],
        ["m", "n"],
        ["o", "p"],
      ],
      "then two per request: one per 40 ms",
    );
    clock.advance(1000);
    await publisher.offer("q", event("q"), "watch");
    assert.deepEqual(queue.batches.at(-1), ["q"], "after a quiet second, at once");
    await answerAll();
    for (const n of ["r", "s", "t"]) {
      await publisher.offer(n, event(n), "watch");
      await answerAll();
    }
    assert.deepEqual(queue.batches.slice(-4), [["q"], ["r"], ["s"], ["t"]], "a burst of four, each at once");
    await publisher.offer("u", event("u"), "watch");
    await settle();
    assert.deepEqual(queue.batches.at(-1), ["t"], "the fifth waits for its turn");
    const flushed = publisher.flush(1000);
    await settle();
    assert.deepEqual(queue.batches.at(-1), ["u"], "stopping: sent without lingering");
    queue.answerNext();
    assert.equal(await flushed, true);
  });
});

describe("publisher start work", () => {
  it("while a starting bridge announces its first lists, part-filled requests go one per START_LINGER_MS; then one per linger again", async () => {
    const queue = heldQueue(40);
    const clock = fakeClock();
    const publisher = publisherOn(queue, clock);
    const answerAll = () => answerEverything(queue);
    /** 100 objects/s for `ms`, each request answered at once; the sizes of the requests sent meanwhile. */
    const stream = async (prefix: string, ms: number): Promise<number[]> => {
      const before = queue.batches.length;
      for (let t = 0; t < ms; t += 10) {
        await publisher.offer(`${prefix}${t}`, event(`${prefix}${t}`), "list");
        await answerAll();
        clock.advance(10);
        await answerAll();
      }
      return queue.batches.slice(before).map((b) => b.length);
    };
    publisher.startWork(true);
    const starting = await stream("s", 2000);
    publisher.startWork(false);
    clock.advance(1000);
    await answerAll();
    const after = await stream("c", 2000);
    // The first few go at once either way (the burst); then the pace shows: a full batch goes
    // at once, and at 100 objects/s one fills within START_LINGER_MS.
    assert.ok(START_LINGER_MS >= 100);
    assert.ok(
      starting.slice(4).every((n) => n >= 9),
      `full or nearly full while starting: ${starting.join(",")}`,
    );
    assert.ok(
      after.slice(4).every((n) => n <= 5),
      `one per 40 ms after: ${after.join(",")}`,
    );
    assert.equal(queue.batches.flat().length, 400, "every object sent once");
    assert.equal(await publisher.flush(1000), true);
  });
});

describe("publisher holds", () => {
  it("holds an announcement until the object's next body arrives (the status write it waits for), or the hold ends", async () => {
    const queue = heldQueue();
    const clock = fakeClock();
    const publisher = publisherOn(queue, clock);
    await publisher.offer("a", event("a"), "child", { holdMs: 60_000 });
    await settle();
    assert.deepEqual(queue.batches, [], "held");
    await publisher.offer("a", { ...event("a"), resourceVersion: "2" }, "watch", { onlyIfPending: true });
    await settle();
    assert.deepEqual(queue.batches, [["a"]], "the newer body ends the hold");
    queue.answerNext();
    await publisher.offer("b", event("b"), "child", { holdMs: 50 });
    clock.advance(49);
    assert.deepEqual(queue.batches, [["a"]], "still held");
    clock.advance(1);
    assert.deepEqual(queue.batches, [["a"], ["b"]], "nothing came: sent when the hold ends");
    queue.answerNext();
    assert.equal(await publisher.flush(1000), true);
  });
});

describe("publisher signing", () => {
  /** A queue that answers at once and keeps every message body it was sent. */
  function recordingQueue() {
    const bodies: string[] = [];
    const transport: QueueTransport = {
      noun: "queue",
      maxBatch: 10,
      lingerMs: 0,
      send(_destination, messages) {
        bodies.push(...messages.map((m) => m.body));
        return Promise.resolve(messages.map(() => ({ ok: true })));
      },
      exists: () => Promise.resolve(true),
      close: () => Promise.resolve(),
    };
    return { transport, bodies };
  }

  it("sends every event signed, under the size cap with its signature, and drops with a log line one the contract cannot carry", async () => {
    const queue = recordingQueue();
    const lines: string[] = [];
    const clock = fakeClock();
    const publisher = new Publisher({
      transport: queue.transport,
      destinationOf: () => "q.fifo",
      maxPending: 100,
      concurrency: 1,
      logger: pino({ level: "error" }, { write: (line: string) => void lines.push(line) }),
      metrics: createBridgeMetrics(new Registry()),
      now: () => clock.nowMs(),
      timers: clock.timers,
      eventKey: TEST_EVENT_KEY,
    });
    const metadata = { name: "big", uid: "uid-big", resourceVersion: "1" };
    const bare = { ...event("big"), v: 2 as const, object: { metadata, blob: "" } };
    // Fits the cap unsigned, not once its kid and MAC are added.
    const blob = "x".repeat(MAX_EVENT_BYTES - Buffer.byteLength(JSON.stringify(bare)) - 20);
    await publisher.offer("big", { ...bare, object: { metadata, blob } }, "watch");
    await publisher.offer("bad", { ...event("bad"), name: "Not a name!" }, "watch");
    await publisher.offer("ok", event("ok"), "watch");
    assert.equal(await publisher.flush(1000), true, "nothing is left waiting");
    const sent = queue.bodies.map((b) => ({ bytes: Buffer.byteLength(b), event: JSON.parse(b) as KeyEvent }));
    assert.deepEqual(
      sent.map((s) => s.event.name),
      ["big", "ok"],
    );
    for (const s of sent) {
      assert.ok(s.bytes <= MAX_EVENT_BYTES, `${s.event.name}: ${s.bytes} bytes`);
      // Signed with its operator's key, derived from the cluster's: no other operator's key verifies it, nor the cluster's.
      assert.deepEqual(verifyKeyEvent(s.event, testKeyring(s.event)), { ok: true });
      assert.equal(verifyKeyEvent(s.event, testKeyring("crontabs.stable.example.com")).ok, false);
      assert.equal(verifyKeyEvent(s.event, new Map([[TEST_EVENT_KEY.kid, TEST_EVENT_KEY.secret]])).ok, false);
    }
    assert.equal(sent[0]!.event.object, undefined, "the body that did not fit with its signature stayed behind");
    assert.equal(lines.length, 1);
    assert.match(lines[0]!, /"object":"bad".*cannot be announced under the event contract/);
    // Held, then dropped by the flush itself while nothing else waited: the flush still ends.
    await publisher.offer("bad", { ...event("bad"), name: "Not a name!" }, "child", { holdMs: 60_000 });
    const flushed = publisher.flush(1000);
    await settle();
    clock.advance(1000);
    assert.equal(await flushed, true);
  });
});
