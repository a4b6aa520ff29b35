// The functions' SQS client, built (clients/sqs-client.ts, and @aws-sdk/client-sqs loaded) on first use. On Lambda the
// event source receives and deletes, so a normal invocation sends nothing to SQS: only a
// deferral during an outage or a retry's backoff does. Loading the SDK then keeps it (with the AWS
// credential chain it pulls in) out of every cold start (`npm run bench:cold`). Only type imports
// of the SDK here and in the modules the Lambda adapter imports, so esbuild leaves its module
// initialisation lazy.
import type * as SqsSdk from "@aws-sdk/client-sqs";
import type { SQSClient } from "@aws-sdk/client-sqs";
import type { SqsSettings } from "../../clients/sqs-client.ts";

/** The client, and the SDK's command classes to send it. */
export interface Sqs {
  client: SQSClient;
  sdk: typeof SqsSdk;
}

/** The first call loads the SDK (and builds the client); later calls answer the same. */
export type SqsClientSource = () => Promise<Sqs>;

const loadSdk = (): Promise<typeof SqsSdk> => import("@aws-sdk/client-sqs");

/** A client someone else built (tests, the CLI's own). */
export function givenSqsClient(client: SQSClient): SqsClientSource {
  let loaded: Promise<Sqs> | undefined;
  return () => (loaded ??= loadSdk().then((sdk) => ({ client, sdk })));
}

export interface LazySqsClient {
  client: SqsClientSource;
  /** Closes its connections, if it was ever built. */
  destroy(): void;
}

/** `onBuilt` sees the client once, as it is built (the local pipeline counts its requests). */
export function lazySqsClient(settings: SqsSettings, onBuilt?: (client: SQSClient) => void): LazySqsClient {
  let built: Promise<Sqs> | undefined;
  let destroyed = false;
  return {
    client: () =>
      (built ??= Promise.all([loadSdk(), import("../../clients/sqs-client.ts")]).then(([sdk, { sqsClient }]) => {
        const client = sqsClient(settings);
        onBuilt?.(client);
        if (destroyed) client.destroy();
        return { client, sdk };
      })),
    destroy() {
      destroyed = true;
      void built?.then(({ client }) => client.destroy());
    },
  };
}
