// The function process is SIGKILLed between its read and its status write: the message comes
// back after its visibility timeout, another poller finishes the job, with no duplicate effect.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import greeting, { configMapName } from "../examples/greeting/operator.ts";
import type { Operator } from "../core/operator.ts";
import type { Poller } from "../functions/adapters/poller.ts";
import { crApi, keyEventOf, pollerFor, publish, ready, receiveAll, runtimeFor, startEnv, waitFor, type Env } from "./support/functions-environment.ts";

const op = greeting as Operator<unknown>;

describe("a function killed mid-reconcile", { timeout: 150_000 }, () => {
  let env: Env;
  let poller: Poller | undefined;

  before(async () => {
    env = await startEnv([op], { file: import.meta.filename });
  });
  after(async () => {
    await poller?.stop();
    await env?.cluster.stop();
  });

  it("is redelivered and converges with no duplicate effect", { timeout: 90_000 }, async () => {
    const crs = crApi(env, op);
    const cr = await crs.create("crashy", { message: "survive this" });
    await publish(env, keyEventOf(op, cr, "ADDED"));

    const child = spawn(process.execPath, ["test/support/poller-stalling-before-status-write.ts"], {
      env: { ...process.env, ...env.cluster.env, LOG_LEVEL: "silent" },
      stdio: ["ignore", "pipe", "inherit"],
    });
    let out = "";
    child.stdout.on("data", (d: Buffer) => (out += d.toString()));
    await waitFor("the child to reach its status write", () => out.includes("WRITING"), 30_000);
    const exited = once(child, "exit");
    child.kill("SIGKILL");
    await exited;

    // Killed after it applied the ConfigMap and before it wrote status.
    assert.equal((await crs.get("crashy"))?.status, undefined);
    assert.equal((await env.core.readNamespacedConfigMap({ name: configMapName("crashy"), namespace: env.cluster.namespace })).data?.message, "survive this");

    // No new event is published: only the redelivery of the killed message can finish the job.
    poller = pollerFor(env, runtimeFor(env, op));
    await waitFor("Ready=True after redelivery", async () => ready(await crs.get("crashy"))?.status === "True", 40_000);
    const final = await crs.get("crashy");
    assert.equal(final?.status?.observedGeneration, 1);
    const redelivered = env.logs.filter((l) => l.msg === "handled" && l.object === `${env.cluster.namespace}/crashy`);
    assert.ok(redelivered.length >= 1);
    assert.ok(Number(redelivered[0]?.receiveCount ?? 2) >= 1);

    const owned = await env.core.listNamespacedConfigMap({ namespace: env.cluster.namespace, labelSelector: "example.com/greeting=crashy" });
    assert.equal(owned.items.length, 1, "exactly one ConfigMap");
    assert.equal(owned.items[0]?.metadata?.ownerReferences?.length, 1, "one owner reference, not two");
    const events = await env.core.listNamespacedEvent({ namespace: env.cluster.namespace, fieldSelector: "involvedObject.name=crashy" });
    assert.equal(events.items.length, 0, "no failure was recorded");
    assert.deepEqual(await receiveAll(env, env.cluster.sqs.queues.fifoDlq), [], "nothing dead-lettered");
  });
});
