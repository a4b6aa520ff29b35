// Typed errors and scheduled re-deliveries, end to end through the real bridge: a failure is
// recorded on the object with the time of its next attempt (status.nextReconcile), the bridge
// announces the object into its own FIFO group when due, and requeueAfterSeconds is one
// schedule per object that a re-announcement can neither fork nor multiply.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { z } from "zod";
import { rfc3339Seconds } from "../core/conditions.ts";
import { PermanentError, TemporaryError } from "../core/errors.ts";
import { defineOperator, type Operator } from "../core/operator.ts";
import { nextReconcileOf } from "../core/schedule.ts";
import type { RunningBridge } from "../bridge/bridge.ts";
import type { Poller } from "../functions/adapters/poller.ts";
import { crApi, pollerFor, ready, receiveAll, runtimeFor, startEnv, startTestBridge, waitFor, type Env } from "./support/functions-environment.ts";

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
    if (t.spec.failUntil && ctx.now < new Date(t.spec.failUntil)) throw new TemporaryError("not yet", 1, "NotYet");
    if (t.spec.refuse) throw new PermanentError("this ticker refuses to tick", "Refused");
    return {
      ...(t.spec.childName ? { children: [{ apiVersion: "v1", kind: "ConfigMap", metadata: { name: t.spec.childName }, data: { a: "b" } }] } : {}),
      status: { tickedAt: rfc3339Seconds(ctx.now) },
      ...(t.spec.every ? { requeueAfterSeconds: t.spec.every } : {}),
    };
  },
});
const op = ticker as Operator<unknown>;

describe("typed errors and requeues, scheduled by the bridge", { timeout: 180_000 }, () => {
  let env: Env;
  let poller: Poller;
  let bridge: RunningBridge;
  const crs = () => crApi(env, op);
  const handled = (name: string) => env.logs.filter((l) => l.msg === "handled" && l.object === `${env.cluster.namespace}/${name}`);

  before(async () => {
    env = await startEnv([op], { file: import.meta.filename });
    bridge = await startTestBridge(env, "test.crdfn.dev/v1/tickers>v1/configmaps");
    poller = pollerFor(env, runtimeFor(env, op));
  });
  after(async () => {
    await poller?.stop();
    await bridge?.stop(1000);
    await env?.cluster.stop();
  });

  it(
    "TemporaryError → Ready=False with its reason and the next attempt on the object, then Ready; the messages were all handled",
    { timeout: 30_000 },
    async () => {
      await crs().create("patient", { failUntil: new Date(Date.now() + 3000).toISOString() });
      await waitFor("the wait shows on the object", async () => {
        const cr = await crs().get("patient");
        return ready(cr)?.reason === "NotYet" && nextReconcileOf(cr?.status)?.reason === "Retry";
      });
      await waitFor("Ready=True once the dependency is there", async () => ready(await crs().get("patient"))?.status === "True", 20_000);
      assert.equal(nextReconcileOf((await crs().get("patient"))?.status), undefined, "nothing left scheduled");
      const attempts = handled("patient");
      assert.ok(
        attempts.some((l) => l.reason === "retry"),
        `retried through the bridge's schedule: ${JSON.stringify(attempts.map((l) => [l.reason, l.outcome]))}`,
      );
      assert.ok(
        attempts.every((l) => l.outcome !== "retry"),
        "never failed back to the queue",
      );
      assert.deepEqual(await receiveAll(env, env.cluster.sqs.queues.fifoDlq), []);
    },
  );

  it("PermanentError, and a child the API server rejects → Ready=False with the reason and one Event; nothing scheduled", { timeout: 40_000 }, async () => {
    for (const [name, spec, reason] of [
      ["refusing", { refuse: true }, "Refused"],
      ["bad-child", { childName: "Not_A_Valid_Name" }, "RejectedByApiServer"],
    ] as const) {
      await crs().create(name, spec);
      await waitFor(`${name}: Ready=False ${reason}`, async () => ready(await crs().get(name))?.reason === reason);
      assert.equal(nextReconcileOf((await crs().get(name))?.status), undefined);
      assert.equal(await bridge.resync({ group: op.resource.group, plural: op.resource.plural, namespace: env.cluster.namespace, name }), 1);
      await waitFor(`${name}: handled twice`, () => handled(name).length >= 2);
      assert.deepEqual(
        handled(name).map((l) => l.outcome),
        ["permanent", "permanent"],
      );
      const events = await env.core.listNamespacedEvent({ namespace: env.cluster.namespace, fieldSelector: `involvedObject.name=${name}` });
      assert.deepEqual(
        events.items.map((e) => e.reason),
        [reason],
        "one Event, not one per delivery",
      );
    }
  });

  it(
    "requeueAfterSeconds → one schedule per object that keeps ticking, is not multiplied by re-announcements, and ends with the object",
    { timeout: 60_000 },
    async () => {
      await crs().create("clock", { every: 1 });
      const seen = new Set<string>();
      await waitFor(
        "three ticks without any change",
        async () => {
          const t = (await crs().get("clock"))?.status?.tickedAt;
          if (typeof t === "string") seen.add(t);
          return seen.size >= 3;
        },
        20_000,
      );
      // Re-announcing the same generation (resync) and a new generation must not start more chains.
      for (let i = 0; i < 3; i++)
        await bridge.resync({ group: op.resource.group, plural: op.resource.plural, namespace: env.cluster.namespace, name: "clock" });
      await crs().patchSpec("clock", { every: 1, label: "v2" });
      const from = handled("clock").length;
      const started = Date.now();
      // A positive signal, not a fixed window: the time 10 reconciles take is the chain's rate.
      await waitFor("ten reconciles of the ticking object", () => handled("clock").length - from >= 10, 60_000);
      const ticks = handled("clock").length - from;
      const seconds = (Date.now() - started) / 1000;
      // One chain ticks at most once a second (plus the re-announcements above); two would tick twice as often.
      assert.ok(ticks <= seconds + 5, `${ticks} reconciles in ${seconds.toFixed(1)} s: one chain`);
      assert.ok(ticks >= 3, `${ticks} reconciles in ${seconds.toFixed(1)} s: still ticking`);
      await crs().delete("clock");
      await waitFor("nothing scheduled once the object is gone", () => bridge.scheduledCount() === 0, 10_000);
    },
  );
});
