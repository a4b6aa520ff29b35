// A poller process for the crash test: it reconciles Greetings normally, but announces the
// moment it is about to write status ("WRITING") and then stalls, so the test can SIGKILL it
// exactly between its read and its write.
import greeting from "../../examples/greeting/operator.ts";
import { sqsClient } from "../../clients/sqs-client.ts";
import { pino } from "pino";
import { startPoller } from "../../functions/adapters/poller.ts";
import { givenSqsClient } from "../../functions/runtime/sqs-client.ts";
import { apiAccess } from "./api-access.ts";
import { loadConfig } from "../../functions/runtime/config.ts";
import { createKubeApi } from "../../functions/runtime/kube-api-http.ts";
import { createRuntime } from "../../functions/runtime/runtime.ts";
import { testRuntimeKeys } from "./event-key.ts";

/** The cluster the test's bridge names (functions-environment.ts CLUSTER). */
const BRIDGE_CLUSTER = "test";

const config = loadConfig(process.env);
const clock = () => new Date();
const real = createKubeApi(await apiAccess(config, { clock }));
const api = {
  ...real,
  replaceStatus: async () => {
    process.stdout.write("WRITING\n");
    // Stall with the event loop kept alive (a bare pending promise would let the process exit).
    setInterval(() => {}, 60_000);
    return new Promise<never>(() => {});
  },
};
const logger = pino({ level: "silent" });
const runtime = createRuntime(greeting, { api, logger, clock, ...testRuntimeKeys(greeting, BRIDGE_CLUSTER) });
startPoller({ sqs: givenSqsClient(sqsClient({})), queueUrls: [config.CRDFN_QUEUE_URL ?? ""], runtime, waitTimeSeconds: 1, visibilityTimeout: 3, logger });
process.stdout.write("STARTED\n");
