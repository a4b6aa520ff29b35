// Typed errors and delayed re-delivery through the standard queue: TemporaryError retries that
// do not spend the dead-letter budget, PermanentError (and a child the API server rejects)
// recorded once, requeueAfterSeconds chains that neither multiply nor outlive their generation,
// and early deliveries that wait for their due time.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { GetQueueAttributesCommand, SendMessageCommand } from "@aws-sdk/client-sqs";
import { z } from "zod";
import { rfc3339Seconds } from "../core/conditions.ts";
import { PermanentError, TemporaryError } from "../core/errors.ts";
import { encodeKeyEvent } from "../core/event.ts";
import { defineOperator, type Operator } from "../core/operator.ts";
import type { Poller } from "../functions/adapters/poller.ts";
import { DUE_AT_ATTRIBUTE } from "../functions/runtime/message.ts";
import { crApi, keyEventOf, pollerFor, publish, ready, receiveAll, runtimeFor, startEnv, waitFor, type Env } from "./support/functions-environment.ts";

const ticker = defineOperator({
  resource: { group: "test.crdfn.dev", version: "v1", plural: "tickers", kind: "Ticker" },
  spec: z.object({
    failUntil: z.iso.datetime().optional(),
    every: z.number().int().positive().optional(),
    label: z.string().optional(),
    refuse: z.boolean().optional(),
    childName: z.string().optional(),
  }),
  owns: [{ group: "", version: "v1", kind: "ConfigMap" }],
  reconcile(t, ctx) {
    if (t.spec.failUntil && ctx.now < new Date(t.spec.failUntil)) throw new TemporaryError("not yet", 1);
    if (t.spec.refuse) throw new PermanentError("this ticker refuses to tick", "Refused");
    return {
      ...(t.spec.childName ? { children: [{ apiVersion: "v1", kind: "ConfigMap", metadata: { name: t.spec.childName }, data: { a: "b" } }] } : {}),
      status: { tickedAt: rfc3339Seconds(ctx.now) },
      ...(t.spec.every ? { requeueAfterSeconds: t.spec.every } : {}),
    };
  },
});
const op = ticker as Operator<unknown>;

describe("typed errors and requeues through the standard queue", { timeout: 180_000 }, () => {
  let env: Env;
  let poller: Poller;
  const crs = () => crApi(env, op);
  const delayedRequeues = async (): Promise<number> => {
    const out = await env.sqs.send(new GetQueueAttributesCommand({ QueueUrl: env.cluster.sqs.queues.standard, AttributeNames: ["ApproximateNumberOfMessagesDelayed"] }));
    return Number(out.Attributes?.ApproximateNumberOfMessagesDelayed ?? 0);
  };

  before(async () => {
    env = await startEnv([op]);
    poller = pollerFor(env, runtimeFor(env, op));
  });
  after(async () => {
    await poller?.stop();
    await env?.cluster.stop();
  });

  it("TemporaryError → reconciled later, the event message deleted, nothing near the DLQ", { timeout: 30_000 }, async () => {
    const cr = await crs().create("patient", { failUntil: new Date(Date.now() + 3000).toISOString() });
    await publish(env, keyEventOf(op, cr, "ADDED"));
    await waitFor("Ready=True once the dependency is there", async () => ready(await crs().get("patient"))?.status === "True", 20_000);
    const attempts = env.logs.filter((l) => l.msg === "handled" && l.object === "default/patient");
    assert.ok(attempts.some((l) => l.outcome === "retry-later"), "it was told to wait");
    assert.ok(attempts.every((l) => l.outcome !== "retry"), "never failed back to the queue");
    assert.deepEqual(await receiveAll(env, env.cluster.sqs.queues.fifoDlq), []);
    assert.deepEqual(await receiveAll(env, env.cluster.sqs.queues.standardDlq), []);
  });

  it("PermanentError, and a child the API server rejects → Ready=False with the reason and one Event; no retries", { timeout: 30_000 }, async () => {
    for (const [name, spec, reason] of [["refusing", { refuse: true }, "Refused"], ["bad-child", { childName: "Not_A_Valid_Name" }, "RejectedByApiServer"]] as const) {
      const cr = await crs().create(name, spec);
      await publish(env, keyEventOf(op, cr, "ADDED"));
      await waitFor(`${name}: Ready=False ${reason}`, async () => ready(await crs().get(name))?.reason === reason);
      await publish(env, { ...keyEventOf(op, cr, "RESYNC"), reason: "resync" }, "again");
      await waitFor(`${name}: handled twice`, () => env.logs.filter((l) => l.msg === "handled" && l.object === `default/${name}`).length >= 2);
      const outcomes = env.logs.filter((l) => l.msg === "handled" && l.object === `default/${name}`).map((l) => l.outcome);
      assert.deepEqual(outcomes, ["permanent", "permanent"]);
      const events = await env.core.listNamespacedEvent({ namespace: "default", fieldSelector: `involvedObject.name=${name}` });
      assert.deepEqual(events.items.map((e) => e.reason), [reason], "one Event, not one per delivery");
    }
  });

  it("requeueAfterSeconds → one chain per object that keeps ticking, does not multiply, and ends with the object", { timeout: 60_000 }, async () => {
    const cr = await crs().create("clock", { every: 1 });
    await publish(env, keyEventOf(op, cr, "ADDED"));
    const seen = new Set<string>();
    await waitFor("three ticks without any new event", async () => {
      const t = (await crs().get("clock"))?.status?.tickedAt;
      if (typeof t === "string") seen.add(t);
      return seen.size >= 3;
    }, 20_000);

    // The bridge re-announcing the same generation (resync, relist) must not start new chains.
    const current = await crs().get("clock");
    for (const cause of ["resync-1", "resync-2", "resync-3"]) await publish(env, { ...keyEventOf(op, current ?? {}, "RESYNC"), reason: "resync" }, cause);
    // A new generation replaces the chain rather than adding one.
    await crs().patchSpec("clock", { every: 1, label: "v2" });
    await publish(env, keyEventOf(op, (await crs().get("clock")) ?? {}));
    let most = 0;
    for (let i = 0; i < 12; i++) {
      await new Promise((r) => setTimeout(r, 500));
      if (i >= 4) most = Math.max(most, await delayedRequeues());
    }
    // Sampled while the chain runs: a sample may fall between two links (0), never see two chains.
    assert.ok(most <= 1, `at most one pending requeue once settled (saw ${most})`);

    await crs().delete("clock");
    await waitFor("the chain ends with the object", async () => (await delayedRequeues()) === 0, 10_000);
  });

  it("a requeue delivered before its due time is re-sent, not reconciled early", { timeout: 30_000 }, async () => {
    const cr = await crs().create("later", {});
    const dueAt = Date.now() + 3000;
    await env.sqs.send(
      new SendMessageCommand({
        QueueUrl: env.cluster.sqs.queues.standard,
        MessageBody: encodeKeyEvent({ ...keyEventOf(op, cr, "RESYNC"), reason: "requeue" }),
        MessageAttributes: { [DUE_AT_ATTRIBUTE]: { DataType: "Number", StringValue: String(dueAt) } },
      }),
    );
    await new Promise((r) => setTimeout(r, 1500));
    assert.equal((await crs().get("later"))?.status, undefined, "not reconciled before it is due");
    await waitFor("reconciled once due", async () => ready(await crs().get("later"))?.status === "True", 15_000);
    assert.ok(Date.now() >= dueAt);
  });
});
