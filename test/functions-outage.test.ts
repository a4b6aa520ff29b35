// An API-server outage must not spend the backlog's dead-letter budget. The API server is
// SIGKILLed with a backlog of key events waiting (OBJECTS objects × 2 events per consumer), stays
// down while both consumers run with the queue's own (local, 30 s) visibility timeout, and comes
// back on the same port and etcd: every object converges within 60 s, both dead-letter queues
// stay empty, nobody redrives anything, and the poller did re-send deferred messages into their
// groups (the outage outlasted their receive budget). One outage exercises both code paths at
// once: the local poller on the crdfn queues, and the real lambdaHandler on queues of its own,
// fed records received from ElasticMQ the way Lambda's event source would.
//
// Scale: while the circuit is open the poller receives one batch (10) per probe (~2 s) and defers
// it ~3 s; a message is re-sent into its group before its 5th receive. With 20 objects a message
// is received every ~4 s, so its budget runs out after ~16 s and a 45 s outage spends it two to
// three times: the same path (circuit open, deferral, re-send, probe, recovery) that production
// runs through with thousands of objects and outages of minutes or hours, which only repeat the
// cycle (up to the 6 h deferral limit). Lambda's event source cannot pause, so its budget runs
// out faster still. CRDFN_TEST_OUTAGE_SECONDS=200 CRDFN_TEST_OUTAGE_OBJECTS=200 runs a
// larger scale (200 s, 400 events per consumer).
import { signedForTest } from "./support/event-key.ts";
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { DeleteMessageBatchCommand, GetQueueAttributesCommand, ReceiveMessageCommand, SendMessageBatchCommand } from "@aws-sdk/client-sqs";
import type { Context } from "aws-lambda";
import { ensureQueues, queueDefinitions } from "../emulator/queues.ts";
import type { Operator } from "../core/operator.ts";
import type { QueueUrls } from "../emulator/types.ts";
import { lambdaHandler } from "../functions/adapters/lambda.ts";
import type { Poller } from "../functions/adapters/poller.ts";
import greeting from "../examples/greeting/operator.ts";
import {
  CLUSTER,
  crApi,
  keyEventOf,
  lambdaEvent,
  pollerFor,
  ready,
  runtimeFor,
  startEnv,
  waitFor,
  type Cr,
  type Env,
} from "./support/functions-environment.ts";
import { encodeKeyEvent, deduplicationId, messageGroupId, type KeyEvent } from "../core/event.ts";
import { DEFERRALS_ATTRIBUTE } from "../functions/runtime/delivery.ts";

const op = greeting as Operator<unknown>;
const OBJECTS = Number(process.env.CRDFN_TEST_OUTAGE_OBJECTS ?? 20);
const OUTAGE_MS = Number(process.env.CRDFN_TEST_OUTAGE_SECONDS ?? 45) * 1000;
const CONVERGE_MS = 60_000;

describe("API server outage: nothing dead-lettered, everything converges", { timeout: 600_000 }, () => {
  let env: Env;
  let poller: Poller | undefined;
  const stopLambda = new AbortController();
  let lambdaLoops: Promise<void>[] = [];

  before(async () => {
    // It stops the API server: servers of its own.
    env = await startEnv([op], { file: import.meta.filename, own: true });
  });
  after(async () => {
    stopLambda.abort();
    await Promise.all(lambdaLoops);
    await poller?.stop();
    await env?.cluster.stop();
  });

  const publishAll = async (queueUrl: string, events: KeyEvent[], cause: string): Promise<void> => {
    for (let i = 0; i < events.length; i += 10) {
      await env.sqs.send(
        new SendMessageBatchCommand({
          QueueUrl: queueUrl,
          Entries: events.slice(i, i + 10).map((e, j) => ({
            Id: String(j),
            MessageBody: encodeKeyEvent(signedForTest(e)),
            MessageGroupId: messageGroupId(e),
            MessageDeduplicationId: deduplicationId(e, cause),
          })),
        }),
      );
    }
  };
  const depth = async (url: string): Promise<number> => {
    const out = await env.sqs.send(
      new GetQueueAttributesCommand({
        QueueUrl: url,
        AttributeNames: ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible", "ApproximateNumberOfMessagesDelayed"],
      }),
    );
    return Object.values(out.Attributes ?? {}).reduce((n, v) => n + Number(v), 0);
  };

  /** Lambda's event source, played by the test: receive, invoke, delete what did not fail. */
  const eventSource = (queueUrl: string, handler: ReturnType<typeof lambdaHandler>): Promise<void> =>
    (async () => {
      while (!stopLambda.signal.aborted) {
        const out = await env.sqs
          .send(
            new ReceiveMessageCommand({
              QueueUrl: queueUrl,
              MaxNumberOfMessages: 10,
              WaitTimeSeconds: 1,
              MessageSystemAttributeNames: ["All"],
              MessageAttributeNames: ["All"],
            }),
          )
          .catch(() => ({ Messages: [] }));
        const batch = out.Messages ?? [];
        if (batch.length === 0) continue;
        const response = await handler(lambdaEvent(batch, queueUrl), {} as Context);
        const failed = new Set(response.batchItemFailures.map((f) => f.itemIdentifier));
        const done = batch.filter((m) => !failed.has(m.MessageId ?? ""));
        if (done.length > 0)
          await env.sqs.send(
            new DeleteMessageBatchCommand({ QueueUrl: queueUrl, Entries: done.map((m, i) => ({ Id: String(i), ReceiptHandle: m.ReceiptHandle ?? "" })) }),
          );
      }
    })();

  it(
    `SIGKILL for ${OUTAGE_MS / 1000} s with ${2 * OBJECTS} events waiting per consumer: converged within ${CONVERGE_MS / 1000} s of the return, DLQs empty`,
    { timeout: 560_000 },
    async () => {
      const lambdaQueues: QueueUrls = await ensureQueues(env.sqs, queueDefinitions("lambda-events"));
      const viaPoller = crApi(env, op);
      const names = Array.from({ length: OBJECTS }, (_, i) => `g-${i}`);
      const created = new Map<string, Cr>();
      for (let i = 0; i < names.length; i += 20) {
        await Promise.all(
          names
            .slice(i, i + 20)
            .flatMap((n) => [
              viaPoller.create(`p-${n}`, { message: "hi" }).then((c) => created.set(`p-${n}`, c)),
              viaPoller.create(`l-${n}`, { message: "hi" }).then((c) => created.set(`l-${n}`, c)),
            ]),
        );
      }

      await env.cluster.apiServer.stop(0);
      const downAt = Date.now();
      const eventsFor = (prefix: string) => names.map((n) => keyEventOf(op, created.get(`${prefix}-${n}`) ?? {}, "ADDED"));
      for (const cause of ["a", "b"]) {
        await publishAll(env.cluster.sqs.queues.fifo, eventsFor("p"), cause);
        await publishAll(lambdaQueues.fifo, eventsFor("l"), cause);
      }
      assert.ok((await depth(env.cluster.sqs.queues.fifo)) >= 2 * OBJECTS && (await depth(lambdaQueues.fifo)) >= 2 * OBJECTS, "the backlog is waiting");

      // What the poller re-sends into a group (a deferral about to run out its receives) says so in an attribute.
      const deferrals: number[] = [];
      env.sqs.middlewareStack.add(
        (next) => async (args) => {
          const attribute = (args.input as { MessageAttributes?: Record<string, { StringValue?: string }> }).MessageAttributes?.[DEFERRALS_ATTRIBUTE];
          if (attribute) deferrals.push(Number(attribute.StringValue));
          return next(args);
        },
        { step: "initialize", name: "countDeferrals" },
      );
      poller = pollerFor(env, runtimeFor(env, op), "queue");
      const handler = lambdaHandler(op, { env: { ...env.cluster.env, CRDFN_CLUSTER: CLUSTER, CRDFN_QUEUE_URL: lambdaQueues.fifo, LOG_LEVEL: "warn" } });
      lambdaLoops = [eventSource(lambdaQueues.fifo, handler)];

      await new Promise((r) => setTimeout(r, OUTAGE_MS - (Date.now() - downAt)));
      await env.cluster.apiServer.start();
      const backAt = Date.now();

      // One LIST per check (not 400 GETs), so the check itself does not slow what it measures.
      const stale = async (): Promise<string[]> => {
        // Right after its start the API server may still answer 429 (storage initializing): not converged yet.
        const list = (await env.custom
          .listNamespacedCustomObject({ group: op.resource.group, version: op.resource.version, plural: op.resource.plural, namespace: env.cluster.namespace })
          .catch(() => ({ items: [] }))) as { items: Cr[] };
        const done = new Set(
          list.items.filter((cr) => ready(cr)?.status === "True" && cr.status?.observedGeneration === cr.metadata?.generation).map((cr) => cr.metadata?.name),
        );
        return [...created.keys()].filter((n) => !done.has(n));
      };
      let last: string[] = [];
      const progress: string[] = [];
      await waitFor(
        "every object converged",
        async () => {
          last = await stale();
          progress.push(
            `${Math.round((Date.now() - backAt) / 1000)}s: poller ${last.filter((n) => n.startsWith("p-")).length}, lambda ${last.filter((n) => n.startsWith("l-")).length}`,
          );
          return last.length === 0;
        },
        CONVERGE_MS,
      ).catch((e: unknown) => {
        const messages = new Map<string, number>();
        for (const l of env.logs) messages.set(String(l.msg), (messages.get(String(l.msg)) ?? 0) + 1);
        throw new Error(
          `${(e as Error).message}: ${last.length} stale, e.g. ${last.slice(0, 5).join(", ")}; progress ${progress.filter((_, i) => i % 20 === 0).join("; ")}; poller log: ${JSON.stringify([...messages])}`,
        );
      });
      console.log(`# stale objects after the return: ${progress.filter((_, i) => i % 10 === 0).join("; ")}`);
      const convergedSeconds = (Date.now() - backAt) / 1000;
      const deadLettered = { poller: await depth(env.cluster.sqs.queues.fifoDlq), lambda: await depth(lambdaQueues.fifoDlq) };
      console.log(`# outage ${OUTAGE_MS / 1000} s: converged ${convergedSeconds.toFixed(1)} s after the return; dead-lettered ${JSON.stringify(deadLettered)}`);
      assert.deepEqual(deadLettered, { poller: 0, lambda: 0 }, "nothing dead-lettered");
      // The outage outlasted the receive budget: messages were re-sent into their groups, some more than once.
      console.log(`# poller: ${deferrals.length} re-sends into their groups, up to ${Math.max(0, ...deferrals)} per message`);
      assert.ok(deferrals.length > 0, `the outage ran out messages' receives (re-sends: ${deferrals.length}, most per message: ${Math.max(0, ...deferrals)})`);
    },
  );
});
