// Fair turns under a backlog. The local queue (ElasticMQ) hands out FIFO groups in a fixed order
// (the first group of a hash map that has a visible message, every receive: MessageQueue.scala's
// `randomMessageGroup` is `keySet.headOption`), and SQS promises no order across groups at all.
// So when objects requeueing every second ask for more reconciles than the function can give, the
// groups late in that order starve: their messages wait while the early ones tick at 1/s. The
// bridge, which schedules every timer, makes the timers take turns (bridge/timer-turns.ts): no
// object's timer is announced while another's has waited unanswered past TURN_WAIT_MS.
//
// First the cause, on the queue alone; then the bound, end to end: 40 objects requeueing every
// second through a function that can reconcile about 10 a second (one at a time, ~100 ms each).
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { DeleteMessageCommand, ReceiveMessageCommand, SendMessageCommand } from "@aws-sdk/client-sqs";
import { z } from "zod";
import { defineOperator, type Operator } from "../core/operator.ts";
import type { RunningBridge } from "../bridge/bridge.ts";
import { TURN_WAIT_MS } from "../bridge/timer-turns.ts";
import type { Poller } from "../functions/adapters/poller.ts";
import type { Runtime } from "../functions/runtime/runtime.ts";
import { crApi, pollerFor, purgeAll, runtimeFor, startEnv, startTestBridge, waitFor, type Env } from "./support/functions-environment.ts";

const ticker = defineOperator({
  resource: { group: "test.crdfn.dev", version: "v1", plural: "fairtickers", kind: "FairTicker" },
  spec: z.object({}),
  reconcile: () => ({ status: {}, requeueAfterSeconds: 1 }),
}) as Operator<unknown>;

const OBJECTS = 40;
const RUN_MS = 45_000;

/** The function as a slow one: one reconcile at a time, each at least `ms` long. */
function slow(runtime: Runtime, ms: number, seen: Array<{ name: string; at: number }>): Runtime {
  let line = Promise.resolve();
  return {
    ...runtime,
    handle: (delivery) => {
      const turn = line.then(async () => {
        const started = Date.now();
        const outcome = await runtime.handle(delivery);
        if (delivery.ok) seen.push({ name: delivery.event.name, at: Date.now() });
        await new Promise((r) => setTimeout(r, Math.max(0, ms - (Date.now() - started))));
        return outcome;
      });
      line = turn.then(
        () => undefined,
        () => undefined,
      );
      return turn;
    },
  };
}

describe("fair turns under a backlog", { timeout: 300_000 }, () => {
  let env: Env;
  before(async () => {
    env = await startEnv([ticker], { file: import.meta.filename });
  });
  after(async () => {
    await env?.cluster.stop();
  });

  it("the cause: the local queue serves FIFO groups in a fixed order, so a group always ready starves the others", async () => {
    await purgeAll(env);
    const { fifo } = env.cluster.sqs.queues;
    const send = (group: string, n: number) =>
      env.sqs.send(new SendMessageCommand({ QueueUrl: fifo, MessageBody: `${group}-${n}`, MessageGroupId: group, MessageDeduplicationId: `${group}-${n}` }));
    for (let g = 0; g < 20; g++) await send(`g${g}`, 0);
    // A consumer that handles one message at a time, and each handled group sends again at once (a
    // requeue with no delay): the groups served are those first in the queue's order, every time.
    const served = new Map<string, number>();
    for (let i = 1; i <= 60; i++) {
      const out = await env.sqs.send(new ReceiveMessageCommand({ QueueUrl: fifo, MaxNumberOfMessages: 1, WaitTimeSeconds: 1 }));
      const m = out.Messages?.[0];
      assert.ok(m, "a message");
      const group = m.Body!.split("-")[0]!;
      served.set(group, (served.get(group) ?? 0) + 1);
      await env.sqs.send(new DeleteMessageCommand({ QueueUrl: fifo, ReceiptHandle: m.ReceiptHandle }));
      await send(group, i);
    }
    console.log(`# groups served in 60 receives with 20 groups waiting: ${JSON.stringify([...served])}`);
    assert.ok(served.size < 20, "some groups were never served while others were served again and again");
    await purgeAll(env);
  });

  it(`the bound: ${OBJECTS} objects requeueing every second through a function that reconciles ~10 a second each get their turn`, async () => {
    await purgeAll(env);
    const crs = crApi(env, ticker);
    const seen: Array<{ name: string; at: number }> = [];
    const bridge: RunningBridge = await startTestBridge(env, "test.crdfn.dev/v1/fairtickers");
    const poller: Poller = pollerFor(env, slow(runtimeFor(env, ticker), 100, seen), "queue", 1);
    let from = 0;
    let held = 0;
    try {
      for (let i = 0; i < OBJECTS; i++) await crs.create(`t${i}`, {});
      // Every object reconciled once: from here on each is a timer chain.
      await waitFor("every object reconciled once", () => Promise.resolve(new Set(seen.map((s) => s.name)).size === OBJECTS), 120_000);
      from = Date.now();
      await new Promise((r) => setTimeout(r, RUN_MS));
      held = (await bridge.registry.getSingleMetric("crdfn_bridge_timers_held_total")?.get())?.values[0]?.value ?? 0;
    } finally {
      await poller.stop();
      await bridge.stop(1000);
    }
    const until = Date.now();
    const window = seen.filter((s) => s.at >= from);
    const throughput = window.length / ((until - from) / 1000);
    const gaps = new Map<string, number>();
    for (let i = 0; i < OBJECTS; i++) {
      const times = [from, ...window.filter((s) => s.name === `t${i}`).map((s) => s.at), until];
      gaps.set(`t${i}`, Math.max(...times.slice(1).map((t, j) => t - times[j]!)));
    }
    const longest = Math.max(...gaps.values());
    // Fair turns: an object waits for the turn limit, then for the others' messages already
    // queued (at most one each) to be handled at the measured rate, then for its own.
    const bound = TURN_WAIT_MS + (2 * OBJECTS * 1000) / throughput + 5000;
    console.log(
      `# ${window.length} reconciles in ${((until - from) / 1000).toFixed(1)} s (${throughput.toFixed(1)}/s) for ${OBJECTS} objects asking 1/s; longest wait ${longest} ms (bound ${Math.round(bound)} ms); timers held ${held} times; per object: ${JSON.stringify([...gaps])}`,
    );
    assert.ok(longest <= bound, `every object had its turn within ${Math.round(bound)} ms (longest ${longest} ms)`);
    assert.ok(held > 0, "the bridge's metric counts the timers it held");
  });
});
