// The local function host for `crdfn dev` and the emulator: everything built from the same
// environment a Lambda would get, consuming the event queue. With `envOf`, each operator runs
// with an environment of its own (its own identity), as each is deployed as a function of its own.
import type { Registry } from "prom-client";
import { ConfigError } from "../../core/config-error.ts";
import type { Operator } from "../../core/operator.ts";
import { buildEach, buildFromEnv, type Served } from "../runtime/entry.ts";
import { createRuntimeMetrics } from "../runtime/prometheus-metrics.ts";
import { startPoller, type Poller } from "./poller.ts";

export interface LocalFunctionsOptions {
  env: NodeJS.ProcessEnv;
  /** Each operator's own settings over `env` (its identity's token, say). */
  envOf?: (operator: Operator<unknown>) => NodeJS.ProcessEnv;
  registry?: Registry;
  /** Poller tuning; defaults behave like Lambda's event source with a 20 s long poll. */
  batchSize?: number;
  waitTimeSeconds?: number;
  visibilityTimeout?: number;
}

export function startLocalFunctions(served: Served, opts: LocalFunctionsOptions): Poller {
  const { registry } = opts;
  const metrics = registry ? { metrics: (cluster: string) => createRuntimeMetrics(registry, cluster) } : {};
  const operators = Array.isArray(served) ? (served as ReadonlyArray<Operator<unknown>>) : [served as Operator<unknown>];
  const { envOf } = opts;
  const { runtime, built } = envOf
    ? buildEach(operators, (op) => ({ ...opts.env, ...envOf(op) }), metrics)
    : (({ runtime: r, ...b }) => ({ runtime: r, built: [{ runtime: r, ...b }] }))(buildFromEnv(served, opts.env, metrics));
  const [first] = built;
  const queueUrl = first?.config.CRDFN_QUEUE_URL;
  if (first === undefined || queueUrl === undefined) throw new ConfigError("invalid setting CRDFN_QUEUE_URL: required to poll locally");
  const poller = startPoller({
    sqs: first.sqs.client,
    queueUrls: [queueUrl],
    runtime,
    logger: first.logger,
    clock: first.clock,
    ...(opts.batchSize === undefined ? {} : { batchSize: opts.batchSize }),
    ...(opts.waitTimeSeconds === undefined ? {} : { waitTimeSeconds: opts.waitTimeSeconds }),
    ...(opts.visibilityTimeout === undefined ? {} : { visibilityTimeout: opts.visibilityTimeout }),
  });
  return {
    async stop() {
      await poller.stop();
      // The spans of the batches just finished, exported before the process goes (bounded).
      await Promise.all(built.map((b) => b.shutdownTraces(TRACE_SHUTDOWN_MS)));
    },
  };
}

/** How long stopping waits for the last spans to reach the collector. */
const TRACE_SHUTDOWN_MS = 2000;
