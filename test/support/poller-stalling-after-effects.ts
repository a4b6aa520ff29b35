// A poller process for the crash test of the effect step: it reconciles Queues normally, but once
// its effects have made the queue (and before anything records it) it says "CREATED" and stalls,
// so the test can SIGKILL it exactly there.
import queue from "../../examples/queue/operator.ts";
import { sqsClient } from "../../clients/sqs-client.ts";
import { pino } from "pino";
import { defineOperator } from "../../core/operator.ts";
import { startPoller } from "../../functions/adapters/poller.ts";
import { givenSqsClient } from "../../functions/runtime/sqs-client.ts";
import { apiAccess } from "./api-access.ts";
import { loadConfig } from "../../functions/runtime/config.ts";
import { createKubeApi } from "../../functions/runtime/kube-api-http.ts";
import { createRuntime } from "../../functions/runtime/runtime.ts";
import { testRuntimeKeys } from "./event-key.ts";

/** The cluster the test's bridge names (functions-environment.ts CLUSTER). */
const BRIDGE_CLUSTER = "test";

const stalling = defineOperator({
  ...queue,
  async effects(object, ctx) {
    await queue.effects?.(object, ctx);
    process.stdout.write("CREATED\n");
    // Stall with the event loop kept alive (a bare pending promise would let the process exit).
    setInterval(() => {}, 60_000);
    return new Promise<never>(() => {});
  },
});

const config = loadConfig(process.env);
const clock = () => new Date();
const api = createKubeApi(await apiAccess(config, { clock }));
const runtime = createRuntime(stalling, { api, logger: pino({ level: "silent" }), clock, env: process.env, ...testRuntimeKeys(stalling, BRIDGE_CLUSTER) });
startPoller({
  sqs: givenSqsClient(sqsClient({})),
  queueUrls: [config.CRDFN_QUEUE_URL ?? ""],
  runtime,
  waitTimeSeconds: 1,
  visibilityTimeout: 3,
  logger: pino({ level: "silent" }),
});
process.stdout.write("STARTED\n");
