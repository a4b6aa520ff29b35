// The queue alone, for a cluster the emulator did not start (`crdfn dev --kubeconfig`): an
// embedded ElasticMQ with the crdfn queues, or the existing endpoint CRDFN_SQS_ENDPOINT names.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { REGION, sqsEnvironment } from "./cluster.ts";
import { elasticMqClasspath, startElasticMq } from "./elasticmq.ts";
import { freePort } from "./ports.ts";
import type { RunningServer } from "./process.ts";
import { queueDefinitions, queueEnv } from "./queues.ts";
import { startReaper } from "./reaper.ts";
import type { SqsEnvironment } from "./types.ts";

export interface LocalQueue {
  sqs: SqsEnvironment;
  /** Environment variables that point the AWS SDK and crdfn's tools at these queues. */
  env: Record<string, string>;
  /** Stops the embedded server and removes its files (an external endpoint is left alone). */
  stop(): Promise<void>;
}

export async function startLocalQueue(opts: { env?: NodeJS.ProcessEnv; log?: (line: string) => void } = {}): Promise<LocalQueue> {
  const env = opts.env ?? process.env;
  const log = opts.log ?? ((line: string) => console.error(line));
  const defs = queueDefinitions();
  const external = env.CRDFN_SQS_ENDPOINT;
  if (external) {
    const sqs = await sqsEnvironment(external, true, defs);
    return { sqs, env: queueEnv(sqs), stop: () => Promise.resolve() };
  }
  const classpath = elasticMqClasspath(env, log);
  const dir = mkdtempSync(join(tmpdir(), "crdfn-queue-"));
  const reaper = startReaper();
  reaper.trackDir(dir);
  let server: RunningServer | undefined;
  const stop = async () => {
    await server?.stop();
    server = undefined;
    rmSync(dir, { recursive: true, force: true, maxRetries: 3 });
    await reaper.release();
  };
  try {
    const port = await freePort();
    log("starting ElasticMQ…");
    server = await startElasticMq({ classpath, dir: join(dir, "elasticmq"), port, queues: defs, reaper, region: REGION });
    const sqs = await sqsEnvironment(`http://127.0.0.1:${port}`, false, defs);
    return { sqs, env: queueEnv(sqs), stop };
  } catch (e) {
    await stop();
    throw e;
  }
}
