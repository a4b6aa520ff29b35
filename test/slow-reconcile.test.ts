// One reconcile per object whatever the reconcile's length: a user's reconcile that takes twice
// the queue's visibility timeout (its effects wait on a slow "cloud"), 100 objects, through the
// real poller (4 receive loops sharing one queue, as `crdfn dev` runs it) against ElasticMQ. A
// message being handled must stay hidden until it is settled, and a redelivery while it runs must
// not start a second reconcile of its object: the overlap recorder sees every reconcile enter and
// leave, and no delete may be refused for a receipt handle the queue has since replaced.
//
// Sized for a loaded CI machine: visibility 3 s, effects of 6 s; the load is what makes a
// heartbeat late, so nothing here asserts on time.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { GetQueueAttributesCommand } from "@aws-sdk/client-sqs";
import { z } from "zod";
import { defineOperator, type Operator } from "../core/operator.ts";
import type { RunningBridge } from "../bridge/bridge.ts";
import type { Poller } from "../functions/adapters/poller.ts";
import { crApi, pollerFor, ready, runtimeFor, startEnv, startTestBridge, waitFor, type Cr, type Env } from "./support/functions-environment.ts";
import { OverlapRecorder } from "./support/overlaps.ts";

const VISIBILITY_SECONDS = 3;
const EFFECTS_MS = 2 * VISIBILITY_SECONDS * 1000;
const OBJECTS = 100;
/** Every CRUNCH_EVERY-th object's first reconcile also holds the process's thread for 1.5 × the visibility timeout. */
const CRUNCH_EVERY = 20;
const CRUNCH_MS = 1.5 * VISIBILITY_SECONDS * 1000;
const GROUP = "test.crdfn.dev";

const slow = defineOperator({
  resource: { group: GROUP, version: "v1", plural: "slowpokes", kind: "Slowpoke" },
  spec: z.object({ label: z.string(), crunch: z.boolean().default(false) }),
  owns: [{ group: "", version: "v1", kind: "ConfigMap" }],
  finalizer: `${GROUP}/slow-cloud`,
  // The slow part of a real reconcile: an external call (async, so the process stays responsive).
  async effects() {
    await new Promise((r) => setTimeout(r, EFFECTS_MS));
  },
  finalize: () => ({ done: true }),
  reconcile(s) {
    // A few reconciles also compute for longer than the visibility timeout, on the poller's own
    // thread: no timer of the process (its heartbeat included) fires meanwhile.
    if (s.spec.crunch && (s.status as { label?: string } | undefined)?.label !== s.spec.label) {
      const until = performance.now() + CRUNCH_MS;
      while (performance.now() < until);
    }
    return {
      children: [{ apiVersion: "v1", kind: "ConfigMap", metadata: { name: `${s.metadata.name}-slow` }, data: { label: s.spec.label } }],
      status: { label: s.spec.label },
    };
  },
}) as Operator<unknown>;

describe("a reconcile longer than the visibility timeout", { timeout: 600_000 }, () => {
  let env: Env;
  let bridge: RunningBridge;
  let poller: Poller;
  const recorder = new OverlapRecorder();
  /** Messages in the event queue, visible or in flight. */
  const queued = async () => {
    const out = await env.sqs.send(
      new GetQueueAttributesCommand({
        QueueUrl: env.cluster.sqs.queues.fifo,
        AttributeNames: ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
      }),
    );
    return Number(out.Attributes?.ApproximateNumberOfMessages ?? 0) + Number(out.Attributes?.ApproximateNumberOfMessagesNotVisible ?? 0);
  };
  const invalidReceipts = () => env.logs.filter((l) => JSON.stringify(l).includes("ReceiptHandleIsInvalid"));

  before(async () => {
    env = await startEnv([slow], { file: import.meta.filename });
    bridge = await startTestBridge(env, `${GROUP}/v1/slowpokes>v1/configmaps@${env.cluster.sqs.queues.fifo}`);
    poller = pollerFor(env, recorder.wrap(runtimeFor(env, slow)), VISIBILITY_SECONDS, 4);
  });
  after(async () => {
    await poller?.stop();
    await bridge?.stop(1000);
    await env?.cluster.stop();
  });

  it(`${OBJECTS} objects, each reconcile ${EFFECTS_MS / 1000} s against a ${VISIBILITY_SECONDS} s visibility: every object reconciled, never two at once, no delete refused`, async () => {
    const crs = crApi(env, slow);
    const names = Array.from({ length: OBJECTS }, (_, i) => `slow-${i}`);
    for (const [i, name] of names.entries()) await crs.create(name, { label: name, crunch: i % CRUNCH_EVERY === 0 });
    const converged = (cr: Cr | undefined) => ready(cr)?.status === "True" && cr?.status?.observedGeneration === cr?.metadata?.generation;
    await waitFor("every object reconciled", async () => (await Promise.all(names.map((n) => crs.get(n)))).every(converged), 300_000).catch((e: unknown) => {
      throw new Error(`${(e as Error).message}; warnings ${JSON.stringify(env.logs.filter((l) => Number(l.level) >= 40).slice(-10))}`);
    });
    // What is still queued (the children's own announcements) drains too: the run ends quiet.
    await waitFor("the queue drained", async () => recorder.running() === 0 && (await queued()) === 0, 300_000);

    const said = (text: string) => env.logs.filter((l) => String(l.msg).startsWith(text)).length;
    const lapsed = said("the visibility of a message in hand lapsed");
    const receivedAgain = said("received again while still in hand");
    const slowOnes = recorder.reconciles.filter((r) => r.endedAt - r.startedAt >= EFFECTS_MS);
    console.log(
      `# ${recorder.reconciles.length} reconciles of ${OBJECTS} objects (${slowOnes.length} of ≥ ${EFFECTS_MS} ms); overlaps ${recorder.overlaps.length}; ` +
        `ReceiptHandleIsInvalid lines ${invalidReceipts().length}; lapsed in hand ${lapsed}, of which received again ${receivedAgain}; warnings ${env.logs.filter((l) => Number(l.level) >= 40).length}`,
    );
    for (const o of recorder.overlaps.slice(0, 3)) console.log(`# overlap: ${JSON.stringify(o)}`);
    assert.ok(slowOnes.length >= OBJECTS, "every object's reconcile outlasted the visibility timeout");
    assert.ok(lapsed > 0, "the crunching reconciles made visibilities lapse in hand (what this test is about)");
    assert.equal(recorder.overlaps.length, 0, "never two reconciles of one object at once");
    assert.deepEqual(invalidReceipts(), [], "no delete or extension refused for a stale receipt handle");
  });
});
