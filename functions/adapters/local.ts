// The local function host for `crdfn dev` and the emulator: everything built from the same
// environment a Lambda would get, consuming the event queue and the requeue queue.
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
  const queueUrls = [built.config.CRDFN_QUEUE_URL, built.config.CRDFN_STANDARD_QUEUE_URL].filter((u): u is string => u !== undefined);
  if (queueUrls.length === 0) throw new ConfigError("invalid setting CRDFN_QUEUE_URL: required to poll locally");
  return startPoller({
    sqs: built.sqs.client,
    queueUrls,
    runtime: built.runtime,
    logger: built.logger,
    clock: built.clock,
    ...(built.requeuer ? { requeuer: built.requeuer } : {}),
    ...(opts.batchSize === undefined ? {} : { batchSize: opts.batchSize }),
    ...(opts.waitTimeSeconds === undefined ? {} : { waitTimeSeconds: opts.waitTimeSeconds }),
    ...(opts.visibilityTimeout === undefined ? {} : { visibilityTimeout: opts.visibilityTimeout }),
  });
}
