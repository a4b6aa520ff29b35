import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { pino } from "pino";
import { createReceiver, type QueueMessage } from "../runtime/delivery.ts";
import type { Outcome } from "../runtime/outcome.ts";
import {
  ADMISSION_WAIT_MS,
  DEFERRAL_MAC_ATTRIBUTE,
  DEFERRALS_ATTRIBUTE,
  DEFERRED_SINCE_ATTRIBUTE,
  resendRequest,
  settleBatch,
  settlementOf,
  type SettlePolicy,
} from "./settle.ts";
import { createCircuits } from "./circuit.ts";
import { signedForTest, testKeyring } from "../../test/support/event-key.ts";
import { fakeRuntime } from "../../test/support/fake-runtime.ts";

const log = pino({ level: "silent" });
const policy = (over: Partial<SettlePolicy> = {}): SettlePolicy => ({
  limit: 5,
  deferSeconds: () => 3,
  retryBaseSeconds: 5,
  maxDeferSeconds: 3600,
  now: 1_000_000,
  log,
  ...over,
});
const message = (receiveCount = 1, attributes: Record<string, string> = {}): QueueMessage => ({ id: "m", body: "{}", receiveCount, attributes });

describe("the settle policy (one for Lambda and the poller)", () => {
  it("deletes what was handled, a recorded failure included", () => {
    for (const o of [{ result: "success" }, { result: "retry-later", delaySeconds: 4, detail: "x" }, { result: "permanent", detail: "x" }] as Outcome[]) {
      assert.deepEqual(settlementOf(o, message(), policy()), { action: "delete" });
    }
  });

  it("releases a message that can never be handled at once, on either adapter", () => {
    assert.deepEqual(settlementOf({ result: "dead-letter", detail: "malformed" }, message(), policy()), { action: "release" });
  });

  it("holds a failed message in its group with growing visibility, and releases it on its last receive", () => {
    const retry: Outcome = { result: "retry", detail: "status write refused" };
    assert.deepEqual(
      [1, 2, 3, 4].map((n) => settlementOf(retry, message(n), policy())),
      [5, 10, 20, 40].map((seconds) => ({ action: "hold", seconds })),
    );
    assert.deepEqual(settlementOf(retry, message(5), policy()), { action: "release" });
  });

  it("defers an outage in its group, and re-sends it into its group before its receives run out, counting deferrals", () => {
    const down: Outcome = { result: "unavailable", detail: "ECONNREFUSED" };
    assert.deepEqual(settlementOf(down, message(1), policy()), { action: "hold", seconds: 3 });
    assert.deepEqual(settlementOf(down, message(4), policy()), { action: "resend", since: 1_000_000, deferrals: 1, seconds: 3 });
    const again = message(4, { [DEFERRED_SINCE_ATTRIBUTE]: "900000", [DEFERRALS_ATTRIBUTE]: "1" });
    assert.deepEqual(settlementOf(down, again, policy()), { action: "resend", since: 900_000, deferrals: 2, seconds: 3 });
  });

  it("leaves a message deferred past the bound to the dead-letter queue", () => {
    const old = message(2, { [DEFERRED_SINCE_ATTRIBUTE]: String(1_000_000 - 3_601_000) });
    assert.deepEqual(settlementOf({ result: "unavailable", detail: "down" }, old, policy()), { action: "release" });
  });
});

interface Item {
  id: string;
  group: string;
  cluster?: string;
}
const item = (id: string, group: string, cluster = "c"): Item => ({ id, group, cluster });
const messageOf = (i: Item): QueueMessage => ({
  id: i.id,
  body: JSON.stringify({
    v: 1,
    cluster: i.cluster,
    group: "example.com",
    version: "v1",
    plural: "greetings",
    kind: "Greeting",
    namespace: "default",
    name: i.group,
    uid: "u",
    resourceVersion: "1",
    generation: 1,
    type: "MODIFIED",
    observedAt: new Date(0).toISOString(),
  }),
  receiveCount: 1,
});
/** `pause`: how a message waits for its circuit; by default it only lets the probe answer (the circuit's clock is the test's). */
const run = (
  items: Item[],
  handle: (m: QueueMessage) => Outcome | Promise<Outcome>,
  circuits?: ReturnType<typeof createCircuits>,
  pause: (ms: number) => Promise<unknown> = () => new Promise((r) => setImmediate(r)),
) => {
  const seen: string[] = [];
  const runtime = fakeRuntime((m) => (seen.push(m.id), handle(m)));
  const result = settleBatch(items, {
    deliveryOf: (i) => runtime.receive(messageOf(i)),
    groupOf: (i) => i.group,
    runtime,
    ...(circuits ? { circuits } : {}),
    policy: (outcome, delivery) => settlementOf(outcome, delivery.message, policy()),
    log,
    pause,
  });
  return { seen, result };
};

describe("a batch", () => {
  it("runs each group in order, groups side by side; behind a message held in its group the rest is deleted untried", async () => {
    const { seen, result } = run([item("a1", "A"), item("b1", "B"), item("a2", "A"), item("a3", "A"), item("b2", "B")], (m) =>
      m.id === "a2" ? { result: "retry", detail: "boom" } : { result: "success" },
    );
    const settled = await result;
    const by = new Map([...settled].map(([i, s]) => [i.id, s]));
    assert.deepEqual(by.get("a2")?.settlement, { action: "hold", seconds: 5 });
    assert.deepEqual(by.get("a3")?.settlement, { action: "delete" });
    assert.match(by.get("a3")?.outcome.detail ?? "", /superseded/);
    assert.ok(!seen.includes("a3"), "a3 was never handed to the runtime");
    assert.ok(seen.indexOf("a1") < seen.indexOf("a2"));
  });

  it("with too little of the invocation's time left, a message is deferred untried and the circuit stays closed", async () => {
    const circuits = createCircuits({ clock: () => new Date(0), logger: log });
    let handled = 0;
    const runtime = fakeRuntime(() => (handled++, { result: "success" }));
    const settled = await settleBatch([item("a1", "A")], {
      deliveryOf: (i) => runtime.receive(messageOf(i)),
      groupOf: (i) => i.group,
      runtime,
      circuits,
      policy: (outcome, delivery) => settlementOf(outcome, delivery.message, policy()),
      log,
      startable: () => false,
    });
    assert.deepEqual(
      [...settled.values()].map((s) => s.settlement),
      [{ action: "hold", seconds: 3 }],
    );
    assert.equal(handled, 0);
    assert.equal(circuits.waitMs(), 0, "the API server did nothing wrong: its circuit is not opened");
  });

  it("a malformed message does not hold back the rest of its group", async () => {
    const { seen, result } = run([item("x", "G"), item("y", "G")], (m) => (m.id === "x" ? { result: "dead-letter", detail: "bad" } : { result: "success" }));
    const settled = [...(await result).values()].map((s) => s.settlement.action);
    assert.deepEqual(settled, ["release", "delete"]);
    assert.deepEqual(seen, ["x", "y"]);
  });

  it("defers untried while the cluster's circuit is open, but lets one probe through; a success closes it, and what waited behind it goes ahead", async () => {
    let t = 0;
    const circuits = createCircuits({ clock: () => new Date(t), logger: log });
    const down = run(
      [item("a1", "A"), item("a2", "A"), item("b1", "B")],
      () => ({ result: "unavailable", detail: "ECONNREFUSED", apiCalls: 1 }) as Outcome,
      circuits,
    );
    const first = [...(await down.result).values()];
    assert.ok(first.every((s) => s.outcome.result === "unavailable" || s.settlement.action === "delete"));
    assert.ok(circuits.waitMs() > 0, "the only cluster is down: receiving pauses");
    t += 60_000;
    const up = run([item("c1", "C"), item("d1", "D")], () => ({ result: "success", apiCalls: 1 }) as Outcome, circuits);
    const probe = new Map([...(await up.result)].map(([i, s]) => [i.id, s.outcome.result]));
    assert.deepEqual(up.seen, ["c1", "d1"], "one probe at a time; the other waited for its answer");
    assert.deepEqual([...probe.values()], ["success", "success"], "nothing deferred once the probe succeeded");
    assert.equal(circuits.waitMs(), 0, "a successful probe closes the circuit");
  });

  it("a message that finds the circuit open and no probe under way is deferred at once, without waiting", async () => {
    const circuits = createCircuits({ clock: () => new Date(0), logger: log });
    await run([item("a1", "A")], () => ({ result: "unavailable", detail: "down", apiCalls: 1 }) as Outcome, circuits).result;
    const pauses: number[] = [];
    const open = await run(
      [item("b1", "B")],
      () => ({ result: "success" }),
      circuits,
      (ms) => Promise.resolve(pauses.push(ms)),
    ).result;
    assert.deepEqual(
      [...open.values()].map((s) => s.settlement.action),
      ["hold"],
    );
    assert.deepEqual(pauses, [], "another cluster's work in the batch is not held up by a down one");
  });

  it("behind a probe that does not answer, a message waits ADMISSION_WAIT_MS at most, then is deferred untried", async () => {
    let t = 0;
    const circuits = createCircuits({ clock: () => new Date(t), logger: log });
    await run([item("a1", "A")], () => ({ result: "unavailable", detail: "down", apiCalls: 1 }) as Outcome, circuits).result;
    t += 60_000;
    let waited = 0;
    const batch = run(
      [item("p1", "P"), item("q1", "Q")],
      // The probe (a hung server) answers only after the other message has given up waiting.
      () => new Promise<Outcome>((r) => setTimeout(() => r({ result: "unavailable", detail: "timeout" }), 100)),
      circuits,
      (ms) => Promise.resolve((waited += ms)),
    );
    const settled = await batch.result;
    assert.deepEqual(batch.seen, ["p1"], "only the probe was tried");
    assert.deepEqual(
      [...settled.values()].map((s) => s.settlement.action),
      ["hold", "hold"],
    );
    assert.ok(waited <= ADMISSION_WAIT_MS && waited >= ADMISSION_WAIT_MS - 250, `waited ${waited} ms`);
  });

  it("one cluster's outage does not hold back another cluster's messages", async () => {
    const circuits = createCircuits({ clock: () => new Date(0), logger: log });
    const handle = (m: QueueMessage): Outcome =>
      m.body.includes('"cluster":"b"') ? ({ result: "unavailable", detail: "down", apiCalls: 1 } as Outcome) : ({ result: "success", apiCalls: 1 } as Outcome);
    await run([item("b1", "B", "b")], handle, circuits).result;
    const next = new Map([...(await run([item("a1", "A", "a"), item("b2", "B2", "b")], handle, circuits).result)].map(([i, s]) => [i.id, s.outcome.result]));
    assert.deepEqual([next.get("a1"), next.get("b2")], ["success", "unavailable"]);
    assert.equal(circuits.waitMs(), 0, "cluster a is up: receiving goes on");
  });
});

describe("a deferred message's copy", () => {
  it("carries its deferral attributes under the MAC its receiver makes; the next receive proves them, and a tampered value is dropped", async () => {
    const receive = createReceiver(
      {
        keysOf: (c, r) => (c === "a" && r === "greetings.example.com" ? testKeyring(r) : undefined),
        resources: [{ group: "example.com", plural: "greetings" }],
      },
      log,
    );
    const body = JSON.stringify(
      signedForTest({
        v: 3,
        cluster: "a",
        group: "example.com",
        version: "v1",
        plural: "greetings",
        kind: "Greeting",
        namespace: "default",
        name: "n",
        uid: "u",
        resourceVersion: "1",
        generation: 1,
        type: "ADDED",
        observedAt: "2026-11-21T00:00:00Z",
      }),
    );
    const delivery = receive({ id: "m", body, receiveCount: 4 });
    // The API server down on the message's last receive but one: re-sent, through the batch as the adapters run it.
    const runtime = { handle: () => Promise.resolve<Outcome>({ result: "unavailable", detail: "ECONNREFUSED" }) };
    const settled = await settleBatch([delivery], {
      deliveryOf: (d) => d,
      groupOf: () => "g",
      runtime,
      policy: (o, d) => settlementOf(o, d.message, policy()),
      log,
    });
    const { settlement } = settled.get(delivery)!;
    assert.equal(settlement.action, "resend");
    if (settlement.action !== "resend") return;
    const request = resendRequest("q", { Body: body, MessageId: "m", Attributes: { MessageGroupId: "g" } }, settlement);
    const attributes = Object.fromEntries(Object.entries(request.MessageAttributes).map(([k, v]) => [k, v.StringValue]));
    assert.deepEqual(Object.keys(attributes).sort(), [DEFERRAL_MAC_ATTRIBUTE, DEFERRALS_ATTRIBUTE, DEFERRED_SINCE_ATTRIBUTE].sort());
    assert.equal(attributes[DEFERRED_SINCE_ATTRIBUTE], "1000000");
    // The copy, received: its attributes proven, kept for the deferral limit; not a first delivery.
    const copy = receive({ id: "m2", body, receiveCount: 1, attributes });
    assert.ok(copy.ok);
    assert.equal(copy.firstDelivery, false);
    assert.equal(copy.message.attributes?.[DEFERRED_SINCE_ATTRIBUTE], "1000000");
    // Someone who may send to the queue moves `since` back to have it dead-lettered at once: dropped, read afresh.
    const tampered = receive({ id: "m3", body, receiveCount: 1, attributes: { ...attributes, [DEFERRED_SINCE_ATTRIBUTE]: "1" } });
    assert.ok(tampered.ok);
    assert.equal(tampered.firstDelivery, false);
    assert.equal(tampered.message.attributes?.[DEFERRED_SINCE_ATTRIBUTE], undefined);
    assert.deepEqual(settlementOf({ result: "unavailable", detail: "down" }, tampered.message, policy({ now: 1_000_000 + 3_700_000 })).action, "hold");
  });
});
