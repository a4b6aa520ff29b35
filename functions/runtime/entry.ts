// Builds everything a function process needs from its environment. Only entry points call
// this (Lambda handler on first invocation, functions-framework start-up, the local poller).
import { SQSClient } from "@aws-sdk/client-sqs";
import { defaultProvider } from "@aws-sdk/credential-provider-node";
import { pino, type Logger } from "pino";
import type { Registry } from "prom-client";
import type { AwsCredentialIdentityProvider } from "@smithy/types";
import type { Operator } from "../../core/operator.ts";
import { apiAccess } from "../credentials/access.ts";
import { loadConfig, type FunctionConfig } from "./config.ts";
import { createKubeApi } from "./kube-http.ts";
import { dispatchByResource } from "./dispatch.ts";
import { createRuntimeMetrics } from "./metrics.ts";
import { createSqsRequeuer, type Requeuer } from "./requeue.ts";
import { createRuntime, type Runtime } from "./runtime.ts";

export interface Built {
  config: FunctionConfig;
  runtime: Runtime;
  sqs: SQSClient;
  logger: Logger;
  clock: () => Date;
  /** Delayed re-delivery on the standard queue (requeues, and messages deferred during an outage). */
  requeuer?: Requeuer;
}

/** One operator, or several sharing a queue. */
export type Served = Operator<unknown> | ReadonlyArray<Operator<unknown>>;

/** Throws ConfigError (one line naming the setting) when the environment is wrong. */
export function buildFromEnv(served: Served, env: NodeJS.ProcessEnv, opts: { registry?: Registry } = {}): Built {
  const operators = Array.isArray(served) ? (served as ReadonlyArray<Operator<unknown>>) : [served as Operator<unknown>];
  const config = loadConfig(env);
  const clock = () => new Date();
  const logger = pino({ level: config.LOG_LEVEL });
  // Everything from the given environment (the SDK's chain would read process.env instead).
  const { AWS_ACCESS_KEY_ID: accessKeyId, AWS_SECRET_ACCESS_KEY: secretAccessKey, AWS_SESSION_TOKEN: sessionToken } = env;
  const awsCredentials = (): AwsCredentialIdentityProvider =>
    accessKeyId && secretAccessKey ? () => Promise.resolve({ accessKeyId, secretAccessKey, ...(sessionToken ? { sessionToken } : {}) }) : defaultProvider();
  const sqs = new SQSClient({
    ...(config.AWS_REGION ? { region: config.AWS_REGION } : {}),
    ...(config.AWS_ENDPOINT_URL_SQS ? { endpoint: config.AWS_ENDPOINT_URL_SQS } : {}),
    credentials: awsCredentials(),
  });
  const api = createKubeApi(apiAccess(config, { clock, awsCredentials }));
  const requeuer = config.CRDFN_STANDARD_QUEUE_URL ? createSqsRequeuer({ sqs, queueUrl: config.CRDFN_STANDARD_QUEUE_URL, clock }) : undefined;
  if (!requeuer) logger.warn("CRDFN_STANDARD_QUEUE_URL is not set: requeues and TemporaryError retries fall back to the visibility timeout");
  const metrics = opts.registry ? createRuntimeMetrics(opts.registry) : undefined;
  const runtime = dispatchByResource(
    operators.map((operator) => ({
      operator,
      runtime: createRuntime(operator, { api, ...(requeuer ? { requeuer } : {}), ...(metrics ? { metrics } : {}), logger: logger.child({ operator: operator.resource.kind }), clock }),
    })),
  );
  return { config, runtime, sqs, logger, clock, ...(requeuer ? { requeuer } : {}) };
}
