// A Lambda function's event keys read from Secrets Manager (CRDFN_EVENT_KEYS_SECRET), against
// moto's Secrets Manager on loopback: the function is configured with the secret's name only,
// verifies its own operator's events and refuses another operator's, follows a rotation (old and
// new key valid at once, then the new one alone once the cached copy is older than the TTL), and
// treats a secret store it cannot reach as an outage: each record is deferred in its FIFO group as for an
// API server outage (held, then re-sent with a fresh receive budget before its last receive), so
// none reaches the dead-letter queue, against a real queue (ElasticMQ).
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { DeleteMessageCommand, SendMessageCommand, type Message } from "@aws-sdk/client-sqs";
import { CreateSecretCommand, PutSecretValueCommand, SecretsManagerClient } from "@aws-sdk/client-secrets-manager";
import { pino } from "pino";
import { formatEventKey, parseEventKey, signKeyEvent } from "../core/event-auth.ts";
import type { KeyEvent } from "../core/event.ts";
import { ConfigError } from "../core/config-error.ts";
import greeting from "../examples/greeting/operator.ts";
import { MAX_RECEIVE_COUNT } from "../emulator/queues.ts";
import { lambdaHandler } from "../functions/adapters/lambda.ts";
import { buildFromEnv, type Built } from "../functions/runtime/entry.ts";
import { EventKeysUnavailable } from "../functions/runtime/event-keys-source.ts";
import { testOperatorKey } from "./support/event-key.ts";
import { startMoto, type Moto } from "./support/moto.ts";
import { lambdaEvent, receiveAll, startEnv, waitFor } from "./support/functions-environment.ts";

const TTL_SECONDS = 1;
const SECRET = "crdfn/test/event-keys/greeting";
const oldKey = testOperatorKey(greeting.resource);
const newKey = testOperatorKey(greeting.resource, parseEventKey(`k2:${Buffer.alloc(32, 9).toString("base64")}`));
const otherOperatorsKey = testOperatorKey("crontabs.stable.example.com");

const event = (name: string): KeyEvent =>
  ({
    v: 1,
    cluster: "dev",
    group: "example.com",
    version: "v1",
    plural: "greetings",
    kind: "Greeting",
    namespace: "default",
    name,
    uid: `u-${name}`,
    resourceVersion: "1",
    generation: 1,
    type: "ADDED",
    observedAt: new Date().toISOString(),
  }) as unknown as KeyEvent;

describe("event keys from Secrets Manager (moto)", { timeout: 240_000 }, () => {
  let moto: Moto;
  let sm: SecretsManagerClient;
  const credentials = { accessKeyId: "testing", secretAccessKey: "testing" };
  const envOf = (endpoint: string): NodeJS.ProcessEnv => ({
    CRDFN_CLUSTER: "dev",
    CRDFN_KUBE_AUTH: "token",
    CRDFN_KUBE_SERVER: "https://127.0.0.1:9",
    CRDFN_KUBE_TOKEN: "t",
    AWS_REGION: "us-east-1",
    AWS_ACCESS_KEY_ID: credentials.accessKeyId,
    AWS_SECRET_ACCESS_KEY: credentials.secretAccessKey,
    AWS_ENDPOINT_URL_SECRETS_MANAGER: endpoint,
    CRDFN_EVENT_KEYS_SECRET: SECRET,
    CRDFN_EVENT_KEYS_SECRET_TTL: String(TTL_SECONDS),
    LOG_LEVEL: "silent",
  });
  let built: Built;
  const accepts = async (e: KeyEvent) => {
    await built.refreshKeys();
    return built.runtime.receive({ id: e.name, body: JSON.stringify(e) }).ok;
  };
  const putKeys = (...keys: Array<typeof oldKey>) => sm.send(new PutSecretValueCommand({ SecretId: SECRET, SecretString: keys.map(formatEventKey).join(",") }));
  const pastTtl = () => new Promise((r) => setTimeout(r, TTL_SECONDS * 1000 + 200));

  before(async () => {
    moto = await startMoto(process.env, (line) => console.log(line));
    sm = new SecretsManagerClient({ region: "us-east-1", endpoint: moto.endpoint, credentials });
    await sm.send(new CreateSecretCommand({ Name: SECRET, SecretString: formatEventKey(oldKey) }));
    built = buildFromEnv(greeting, envOf(moto.endpoint), { refreshesKeys: true, logger: pino({ level: "silent" }) });
  });
  after(async () => {
    sm?.destroy();
    await moto?.stop();
  });

  it("configured with the secret's name only: verifies an event signed with its operator's key, refuses one signed with another operator's", async () => {
    assert.equal(built.config.CRDFN_EVENT_KEYS, undefined);
    assert.equal(await accepts(signKeyEvent(event("own"), oldKey)), true);
    assert.equal(await accepts(signKeyEvent(event("other"), otherOperatorsKey)), false);
  });

  it("rotation: old and new key both accepted, then after the TTL only the new one", async () => {
    await putKeys(oldKey, newKey);
    await pastTtl();
    assert.equal(await accepts(signKeyEvent(event("old-1"), oldKey)), true);
    assert.equal(await accepts(signKeyEvent(event("new-1"), newKey)), true);
    await putKeys(newKey);
    // Within the TTL the cached copy still holds the old key: no request per batch.
    assert.equal(await accepts(signKeyEvent(event("old-2"), oldKey)), true);
    await pastTtl();
    assert.equal(await accepts(signKeyEvent(event("old-3"), oldKey)), false);
    assert.equal(await accepts(signKeyEvent(event("new-2"), newKey)), true);
  });

  it("a function pinned to a staging label (eventKeysLabel) follows that label as it moves, not AWSCURRENT", async () => {
    const label = "deploy";
    await sm.send(new PutSecretValueCommand({ SecretId: SECRET, SecretString: formatEventKey(oldKey), VersionStages: [label] }));
    const pinned = buildFromEnv(
      greeting,
      { ...envOf(moto.endpoint), CRDFN_EVENT_KEYS_SECRET_STAGE: label },
      { refreshesKeys: true, logger: pino({ level: "silent" }) },
    );
    const pinnedAccepts = async (e: KeyEvent) => {
      await pinned.refreshKeys();
      return pinned.runtime.receive({ id: e.name, body: JSON.stringify(e) }).ok;
    };
    // AWSCURRENT holds the new key alone (the rotation above); the label still the old one.
    assert.equal(await pinnedAccepts(signKeyEvent(event("label-old"), oldKey)), true);
    assert.equal(await pinnedAccepts(signKeyEvent(event("label-new"), newKey)), false);
    await sm.send(new PutSecretValueCommand({ SecretId: SECRET, SecretString: formatEventKey(newKey), VersionStages: [label] }));
    await pastTtl();
    assert.equal(await pinnedAccepts(signKeyEvent(event("label-new-2"), newKey)), true);
    assert.equal(await pinnedAccepts(signKeyEvent(event("label-old-2"), oldKey)), false);
  });

  it("a secret store it cannot reach is an outage: each record is deferred in its group as for an API server outage, and none is dead-lettered however long it lasts", async () => {
    const env = await startEnv([greeting], { file: import.meta.filename, identities: false });
    try {
      const { fifo, fifoDlq } = env.cluster.sqs.queues;
      const { sqs } = env.cluster;
      const handler = lambdaHandler(greeting, {
        env: {
          ...envOf("http://127.0.0.1:9"),
          AWS_ENDPOINT_URL_SQS: sqs.endpoint,
          AWS_REGION: sqs.region,
          AWS_ACCESS_KEY_ID: sqs.accessKeyId,
          AWS_SECRET_ACCESS_KEY: sqs.secretAccessKey,
        },
      });
      const sent = signKeyEvent(event("down"), oldKey);
      await env.sqs.send(new SendMessageCommand({ QueueUrl: fifo, MessageBody: JSON.stringify(sent), MessageGroupId: "g", MessageDeduplicationId: "down" }));
      // Twice the queue's receive limit: each receive handed to the function as Lambda's event
      // source would, and each answered by deferral (a hold, then a fresh copy before the last).
      const receives: string[] = [];
      for (let i = 0; i < 2 * MAX_RECEIVE_COUNT; i++) {
        let batch: Message[] = [];
        await waitFor(`receive ${i + 1}`, async () => (batch = await receiveAll(env, fifo, 30)).length > 0, 60_000);
        assert.equal(batch.length, 1);
        receives.push(batch[0]!.Attributes?.ApproximateReceiveCount ?? "?");
        const answer = await handler(lambdaEvent(batch, fifo), undefined as never);
        // Reported failed (held) or handled (its copy re-sent into the group): never lost.
        if (answer.batchItemFailures.length === 0) await env.sqs.send(new DeleteMessageCommand({ QueueUrl: fifo, ReceiptHandle: batch[0]!.ReceiptHandle }));
      }
      console.log(`# receive counts seen during the outage: ${receives.join(", ")}`);
      assert.ok(
        receives.every((n) => Number(n) < MAX_RECEIVE_COUNT),
        `a receive reached the limit: ${receives.join(", ")}`,
      );
      assert.deepEqual(await receiveAll(env, fifoDlq), [], "nothing dead-lettered");
      let left: Message[] = [];
      await waitFor("the record still pending in its group", async () => (left = await receiveAll(env, fifo, 1)).length > 0, 60_000);
      assert.equal(left.length, 1);
      assert.equal((JSON.parse(left[0]!.Body ?? "{}") as { mac?: string }).mac, sent.mac, "the same signed event, unaltered");
    } finally {
      await env.cluster.stop();
    }
  });

  it(
    "a secret store that accepts the connection and never answers is an outage within its request timeout, not a batch held until the Lambda's",
    { timeout: 90_000 },
    async () => {
      const hung = createServer(() => {}); // reads the request, never answers
      await new Promise<void>((resolve) => hung.listen(0, "127.0.0.1", resolve));
      try {
        const { port } = hung.address() as AddressInfo;
        const stuck = buildFromEnv(greeting, envOf(`http://127.0.0.1:${port}`), { refreshesKeys: true, logger: pino({ level: "silent" }) });
        await assert.rejects(stuck.refreshKeys(), (e: unknown) => e instanceof EventKeysUnavailable && /cannot read secret/.test(e.message));
      } finally {
        hung.closeAllConnections();
        hung.close();
      }
    },
  );

  it("refuses both settings at once, and a host that never fetches, in one line naming the setting", () => {
    assert.throws(
      () => buildFromEnv(greeting, { ...envOf(moto.endpoint), CRDFN_EVENT_KEYS: formatEventKey(oldKey) }, { refreshesKeys: true }),
      (e: unknown) =>
        e instanceof ConfigError && /^invalid setting CRDFN_EVENT_KEYS_SECRET: set CRDFN_EVENT_KEYS or CRDFN_EVENT_KEYS_SECRET, not both$/.test(e.message),
    );
    assert.throws(
      () => buildFromEnv(greeting, envOf(moto.endpoint)),
      (e: unknown) => e instanceof ConfigError && /^invalid setting CRDFN_EVENT_KEYS_SECRET: read on AWS Lambda only/.test(e.message),
    );
  });
});
