// The Cloud Run side of `crdfn dev --target cloudrun`, as deployed (deploy/gcp.ts) but on
// this machine: per operator, a topic, an ordered push subscription dead-lettering after 5
// deliveries with a retry policy, a dead-letter topic and its pull subscription, on the Pub/Sub
// emulator; a functions-framework server serving that operator's `httpHandler` over real HTTP
// (its runtime built with the operator's own identity); and the local push deliverer, which
// stands in for push (emulator/pubsub-push.ts says what it reproduces).
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import * as functionsFramework from "@google-cloud/functions-framework";
import { getTestServer } from "@google-cloud/functions-framework/testing";
import type { Logger } from "pino";
import type { Operator } from "../../core/operator.ts";
import { operatorName } from "../../deploy/rbac.ts";
import { pubSubNamesOf, type PubSubNames } from "../../deploy/queue-names.ts";
import type { LocalPubSub } from "../../emulator/pubsub.ts";
import { startPushDeliverer, type PushDeliverer, type PushRecord } from "../../emulator/pubsub-push.ts";
import { createPubSubResources } from "../../emulator/pubsub-resources.ts";
import { pubSubClient } from "../../clients/pubsub-client.ts";
import { httpHandler } from "../../functions/adapters/http.ts";
import { pubSubRepublisher, type Republish } from "../../functions/adapters/pubsub-republish.ts";
import { swappableRuntime, type Runtime } from "../../functions/runtime/runtime.ts";

/** Resource names: <prefix><operator>-events…; the dev environment's prefix. */
export const LOCAL_PUBSUB_PREFIX = "crdfn-";
/** As the generated subscription has it (deploy/gcp.ts): dead-lettered after this many deliveries. */
export const LOCAL_MAX_DELIVERY_ATTEMPTS = 5;
/** Shorter than the deployed policy's 5–600 s, so that a failure reaches the dead-letter topic in seconds locally. */
export const LOCAL_RETRY_BACKOFF_SECONDS = { minimum: 1, maximum: 10 } as const;

export interface LocalCloudRunOptions {
  pubsub: LocalPubSub;
  operators: ReadonlyArray<Operator<unknown>>;
  /** The runtime serving an operator's events now (`crdfn dev --watch` swaps it). */
  runtimeOf: (operator: Operator<unknown>) => Runtime;
  logger: Logger;
  /** Told about each refused push (which delivery, when the next). */
  log?: (line: string) => void;
  /** Told about every push request the deliverers make (the benchmark counts and times them). */
  onPush?: (push: PushRecord) => void;
}

export interface LocalCloudRun {
  /** Each operator's resource names, by its lower-cased kind. */
  names: ReadonlyMap<string, PubSubNames>;
  /** Each operator's function URL, by its lower-cased kind. */
  urls: ReadonlyMap<string, string>;
  stop(): Promise<void>;
}

/** functions-framework keeps registered functions in one map per process: each start gets fresh names. */
let started = 0;

export async function startLocalCloudRun(o: LocalCloudRunOptions): Promise<LocalCloudRun> {
  const client = await pubSubClient({ projectId: o.pubsub.projectId, emulatorHost: o.pubsub.host });
  const servers: Server[] = [];
  const deliverers: PushDeliverer[] = [];
  const republishers: Republish[] = [];
  const names = new Map<string, PubSubNames>();
  const urls = new Map<string, string>();
  const stop = async (): Promise<void> => {
    await Promise.all(deliverers.splice(0).map((d) => d.stop()));
    await Promise.all(servers.splice(0).map((s) => new Promise<void>((r) => s.close(() => r()))));
    await Promise.all(republishers.splice(0).map((r) => r.close()));
    await client.close();
  };
  const run = ++started;
  try {
    for (const op of o.operators) {
      const n = operatorName(op);
      const made = await createPubSubResources(client, {
        prefix: `${LOCAL_PUBSUB_PREFIX}${n}-`,
        maxDeliveryAttempts: LOCAL_MAX_DELIVERY_ATTEMPTS,
        minimumBackoffSeconds: LOCAL_RETRY_BACKOFF_SECONDS.minimum,
        maximumBackoffSeconds: LOCAL_RETRY_BACKOFF_SECONDS.maximum,
      });
      const expected = pubSubNamesOf(o.pubsub.projectId, LOCAL_PUBSUB_PREFIX, n);
      if (made.topic !== expected.topic || made.deadLetterSubscription !== expected.deadLetterSubscription)
        throw new Error(`Pub/Sub names disagree: ${made.topic} / ${expected.topic}`);
      names.set(n, expected);
      const republish = pubSubRepublisher({ topic: made.topic, emulatorHost: o.pubsub.host });
      republishers.push(republish);
      const handler = httpHandler(op, {
        runtime: swappableRuntime(() => o.runtimeOf(op)),
        logger: o.logger.child({ function: n }),
        republish,
        // What the generated deployment sets beside its subscription, with the local backoff.
        env: {
          CRDFN_PUBSUB_TOPIC: made.topic,
          CRDFN_MAX_DELIVERY_ATTEMPTS: String(LOCAL_MAX_DELIVERY_ATTEMPTS),
          CRDFN_RETRY_MIN_BACKOFF_SECONDS: String(LOCAL_RETRY_BACKOFF_SECONDS.minimum),
          CRDFN_RETRY_MAX_BACKOFF_SECONDS: String(LOCAL_RETRY_BACKOFF_SECONDS.maximum),
        },
      });
      const target = `crdfn-dev-${run}-${n}`;
      functionsFramework.http(target, handler);
      const server = getTestServer(target);
      await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
      servers.push(server);
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
      urls.set(n, url);
      deliverers.push(
        await startPushDeliverer({
          pubsub: client,
          subscription: made.subscription,
          endpoint: url,
          format: "push",
          ...(o.log ? { log: o.log } : {}),
          ...(o.onPush ? { onPush: o.onPush } : {}),
        }),
      );
    }
  } catch (e) {
    await stop();
    throw e;
  }
  return { names, urls, stop };
}
