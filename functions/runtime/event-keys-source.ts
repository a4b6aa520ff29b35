// Where a function's event keys come from: the plain setting CRDFN_EVENT_KEYS (dev, tests, a host
// that injects secrets itself), or a Secrets Manager secret named by CRDFN_EVENT_KEYS_SECRET,
// fetched at cold start and again once its cached copy is older than the TTL (Powertools
// Parameters' cache), so the Lambda's configuration (lambda:GetFunctionConfiguration) names the
// secret but holds no key, and a rotation reaches warm functions without a redeploy.
import type { SecretsProvider } from "@aws-lambda-powertools/parameters/secrets";
import type { AwsCredentialIdentityProvider } from "@smithy/types";
import { boundedRequests } from "../../clients/request-bounds.ts";
import type { FunctionConfig } from "./config.ts";

/** The keys' text (CRDFN_EVENT_KEYS' syntax); rejects when the secret store cannot be read. */
export type EventKeysSource = () => Promise<string | undefined>;

/**
 * How long one read of the secret may take. A store that accepts the connection and never answers
 * would otherwise hold the batch until the Lambda's own timeout, spending every message's receive
 * for nothing; bounded, it is an outage (deferred, as an API server's) within seconds.
 */
export const SECRET_REQUEST_TIMEOUT_MS = 5000;

/** A failed fetch: an outage of the secret store or of the grant, never the message's fault. */
export class EventKeysUnavailable extends Error {}

export function eventKeysSource(config: FunctionConfig, credentials: () => AwsCredentialIdentityProvider): EventKeysSource {
  const name = config.CRDFN_EVENT_KEYS_SECRET;
  if (name === undefined) {
    const text = config.CRDFN_EVENT_KEYS;
    return () => Promise.resolve(text);
  }
  const stage = config.CRDFN_EVENT_KEYS_SECRET_STAGE;
  // Loaded on first use: a function given its keys in plain text never loads the SDK client.
  let provider: Promise<SecretsProvider> | undefined;
  const load = async () => {
    const [{ SecretsProvider }, { SecretsManagerClient }] = await Promise.all([
      import("@aws-lambda-powertools/parameters/secrets"),
      import("@aws-sdk/client-secrets-manager"),
    ]);
    const client = new SecretsManagerClient({
      ...(config.AWS_REGION ? { region: config.AWS_REGION } : {}),
      ...(config.AWS_ENDPOINT_URL_SECRETS_MANAGER ? { endpoint: config.AWS_ENDPOINT_URL_SECRETS_MANAGER } : {}),
      credentials: credentials(),
      // One retry at most: the batch, not the SDK, waits out an outage (the messages are deferred).
      maxAttempts: 2,
      requestHandler: boundedRequests(3000, SECRET_REQUEST_TIMEOUT_MS),
    });
    return new SecretsProvider({ awsSdkV3Client: client });
  };
  // A module that failed to load is loaded again on the next batch, not remembered as failed.
  const loaded = () => (provider ??= load().catch((e: unknown) => ((provider = undefined), Promise.reject(e as Error))));
  return async () => {
    try {
      const p = await loaded();
      const value = await p.get(name, { maxAge: config.CRDFN_EVENT_KEYS_SECRET_TTL, ...(stage ? { sdkOptions: { VersionStage: stage } } : {}) });
      if (typeof value !== "string") throw new Error("the secret has no SecretString");
      return value;
    } catch (e) {
      throw new EventKeysUnavailable(`event keys: cannot read secret ${name}${stage ? ` (stage ${stage})` : ""}: ${(e as Error).message}`);
    }
  };
}
