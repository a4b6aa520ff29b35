// The queue alone, for a cluster the emulator did not start (`crdfn dev --kubeconfig`): an
// embedded ElasticMQ with the crdfn queues, or the existing endpoint CRDFN_SQS_ENDPOINT names.
import { join } from "node:path";
import { withSetupDefaults, type BinaryOptions } from "./binaries.ts";
import { REGION, sqsEnvironment } from "./cluster.ts";
import { elasticMqClasspath, startElasticMq } from "./elasticmq.ts";
import { startEmbedded } from "./process.ts";
import { queueDefinitions, queueEnv } from "./queues.ts";
import type { QueueStorage, SqsEnvironment } from "./types.ts";

export interface LocalQueue {
  sqs: SqsEnvironment;
  /** Environment variables that point the AWS SDK and crdfn's tools at these queues. */
  env: Record<string, string>;
  /** Stops the embedded server and removes its files (an external endpoint is left alone). */
  stop(): Promise<void>;
}

export async function startLocalQueue(opts: Partial<BinaryOptions> & { jvmArgs?: readonly string[]; storage?: QueueStorage } = {}): Promise<LocalQueue> {
  const { env, log } = withSetupDefaults(opts);
  const defs = queueDefinitions();
  const external = env.CRDFN_SQS_ENDPOINT;
  if (external) {
    const sqs = await sqsEnvironment(external, true, defs);
    return { sqs, env: queueEnv(sqs), stop: () => Promise.resolve() };
  }
  const classpath = elasticMqClasspath(env, log);
  log("starting ElasticMQ…");
  const embedded = await startEmbedded("crdfn-queue", ({ dir, port, reaper }) =>
    startElasticMq({
      classpath,
      dir: join(dir, "elasticmq"),
      port,
      queues: defs,
      reaper,
      region: REGION,
      storage: opts.storage ?? "disk",
      ...(opts.jvmArgs ? { jvmArgs: opts.jvmArgs } : {}),
    }),
  );
  try {
    const sqs = await sqsEnvironment(`http://127.0.0.1:${embedded.port}`, false, defs);
    return { sqs, env: queueEnv(sqs), stop: embedded.stop };
  } catch (e) {
    await embedded.stop();
    throw e;
  }
}
