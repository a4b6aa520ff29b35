// Every SQS client crdfn builds (the bridge's, the functions', the CLI's, the local queue's and
// the tests'), from where the queue is and as whom to call it. The functions import this module
// only on their first SQS request (functions/runtime/sqs-client.ts): a Lambda's cold start loads
// no SDK.
import { SQSClient, type SQSClientConfig } from "@aws-sdk/client-sqs";

/** Where the queue is and as whom to call it. */
export interface SqsSettings {
  /** Unset: the SDK's own lookup (AWS_REGION of the process). */
  region?: string;
  /** Another SQS than AWS's (ElasticMQ): AWS_ENDPOINT_URL_SQS. */
  endpoint?: string;
  /** Keys given outright (ElasticMQ's placeholders, a `.crdfn/env`). */
  accessKeyId?: string;
  secretAccessKey?: string;
  sessionToken?: string;
  /** A credential provider instead (the functions share theirs with their EKS tokens); neither: the SDK's default chain. */
  credentials?: SQSClientConfig["credentials"];
}

/** How a client retries and how long it waits: the caller's to choose. */
export type SqsTuning = Omit<SQSClientConfig, "endpoint" | "region" | "credentials">;

export function sqsClient(settings: SqsSettings, tuning: SqsTuning = {}): SQSClient {
  const { region, endpoint, accessKeyId, secretAccessKey, sessionToken } = settings;
  const keys = accessKeyId && secretAccessKey ? { accessKeyId, secretAccessKey, ...(sessionToken ? { sessionToken } : {}) } : undefined;
  const credentials = settings.credentials ?? keys;
  return new SQSClient({
    ...tuning,
    ...(region ? { region } : {}),
    ...(endpoint ? { endpoint } : {}),
    ...(credentials ? { credentials } : {}),
  });
}

/** The settings an environment names: AWS_REGION (us-east-1 when unset: ElasticMQ ignores it), AWS_ENDPOINT_URL_SQS and the AWS_* keys. */
export function sqsSettingsOf(env: NodeJS.ProcessEnv): SqsSettings {
  return {
    region: env.AWS_REGION ?? "us-east-1",
    ...(env.AWS_ENDPOINT_URL_SQS ? { endpoint: env.AWS_ENDPOINT_URL_SQS } : {}),
    ...(env.AWS_ACCESS_KEY_ID ? { accessKeyId: env.AWS_ACCESS_KEY_ID } : {}),
    ...(env.AWS_SECRET_ACCESS_KEY ? { secretAccessKey: env.AWS_SECRET_ACCESS_KEY } : {}),
    ...(env.AWS_SESSION_TOKEN ? { sessionToken: env.AWS_SESSION_TOKEN } : {}),
  };
}
