// The local function host for `crdfn dev` and the emulator: everything built from the same
// environment a Lambda would get, consuming the event queue.
import type { Registry } from "prom-client";
import { ConfigError } from "../../core/config-error.ts";
import { buildFromEnv, type Served } from "../runtime/entry.ts";
import { createRuntimeMetrics } from "../runtime/prometheus-metrics.ts";
import { startPoller, type Poller } from "./poller.ts";

export interface LocalFunctionsOptions {
  env: NodeJS.ProcessEnv;
  registry?: Registry;
  /** Poller tuning; defaults behave like Lambda's event source with a 20 s long poll. */
  batchSize?: number;
  waitTimeSeconds?: number;
  visibilityTimeout?: number;
}

export function startLocalFunctions(served: Served, opts: LocalFunctionsOptions): Poller {
  const { registry } = opts;
  const built = buildFromEnv(served, opts.env, registry ? { metrics: (cluster) => createRuntimeMetrics(registry, cluster) } : {});
  const queueUrl = built.config.CRDFN_QUEUE_URL;
  if (queueUrl === undefined) throw new ConfigError("invalid setting CRDFN_QUEUE_URL: required to poll locally");
  return startPoller({
    sqs: built.sqs.client,
    queueUrls: [queueUrl],
    runtime: built.runtime,
    logger: built.logger,
    clock: built.clock,
    ...(opts.batchSize === undefined ? {} : { batchSize: opts.batchSize }),
    ...(opts.waitTimeSeconds === undefined ? {} : { waitTimeSeconds: opts.waitTimeSeconds }),
    ...(opts.visibilityTimeout === undefined ? {} : { visibilityTimeout: opts.visibilityTimeout }),
  });
}
