// The function process is SIGKILLed in the middle of the effect step — after it created the SQS
// queue, before anything recorded it — and the message is redelivered: another function finds
// the queue the killed one made instead of making a second, and records it. Exactly one queue.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { ListQueuesCommand } from "@aws-sdk/client-sqs";
import queue, { configMapName, queueName } from "../examples/queue/operator.ts";
import type { Operator } from "../core/operator.ts";
import type { Poller } from "../functions/adapters/poller.ts";
import { createKubeApi } from "../functions/runtime/kube-api-http.ts";
import { createRuntime } from "../functions/runtime/runtime.ts";
import { CLUSTER, crApi, keyEventOf, pollerFor, publish, ready, receiveAll, startEnv, waitFor, type Env } from "./support/functions-environment.ts";
import { testRuntimeKeys } from "./support/event-key.ts";

const op = queue as Operator<unknown>;

describe("a function killed in the middle of its effect step", { timeout: 150_000 }, () => {
  let env: Env;
  let poller: Poller | undefined;

  before(async () => {
    env = await startEnv([op], { file: import.meta.filename });
  });
  after(async () => {
    await poller?.stop();
    await env?.cluster.stop();
  });

  const queuesOf = async (prefix: string) => (await env.sqs.send(new ListQueuesCommand({ QueueNamePrefix: prefix }))).QueueUrls ?? [];

  it("is redelivered, finds the queue it made, and exactly one queue exists", { timeout: 90_000 }, async () => {
    const crs = crApi(env, op);
    const cr = await crs.create("crashy", { visibilityTimeoutSeconds: 45 });
    await publish(env, keyEventOf(op, cr, "ADDED"));
    const name = queueName({ metadata: { namespace: env.cluster.namespace, name: "crashy", uid: cr.metadata?.uid ?? "" } });

    const child = spawn(process.execPath, ["test/support/poller-stalling-after-effects.ts"], {
      env: { ...process.env, ...env.cluster.env, LOG_LEVEL: "silent" },
      stdio: ["ignore", "pipe", "inherit"],
    });
    let out = "";
    child.stdout.on("data", (d: Buffer) => (out += d.toString()));
    await waitFor("the child to create the queue", () => out.includes("CREATED"), 30_000);
    const exited = once(child, "exit");
    child.kill("SIGKILL");
    await exited;

    // Killed after it made the queue and before anything recorded it.
    assert.equal((await queuesOf(name)).length, 1);
    assert.equal((await crs.get("crashy"))?.status?.url, undefined);

    // No new event is published: only the redelivery of the killed message can finish the job,
    // run as deployed (its own token) with the function's environment (the queue server's endpoint).
    const asDeployed = createKubeApi({ connection: env.identities!.functionConnection(op) });
    poller = pollerFor(
      env,
      createRuntime(op, { api: asDeployed, logger: env.logger, clock: () => new Date(), env: env.cluster.env, ...testRuntimeKeys(op, CLUSTER) }),
    );
    await waitFor("Ready=True after redelivery", async () => ready(await crs.get("crashy"))?.status === "True", 40_000);

    const urls = await queuesOf(name);
    assert.equal(urls.length, 1, "exactly one queue");
    const final = await crs.get("crashy");
    assert.equal(final?.status?.url, urls[0]);
    assert.match(String(final?.status?.arn), new RegExp(`:${name}$`));
    assert.equal((await env.core.readNamespacedConfigMap({ name: configMapName("crashy"), namespace: env.cluster.namespace })).data?.url, urls[0]);
    assert.deepEqual(await receiveAll(env, env.cluster.sqs.queues.fifoDlq), [], "nothing dead-lettered");
  });
});
