// "Never backwards": a burst of spec updates queues messages whose carried bodies are
// older than the object by the time they are handled. Nothing the function writes may step back:
// children are fenced by the parent's generation, which the generated admission policy enforces
// (core/fence.ts), and effects act only on a quorum read. On every delivery path — the local
// poller (4 receive loops, as `crdfn dev` runs it), the Lambda adapter behind a stand-in for
// Lambda's event source (3 concurrent invocations), and the Cloud Run path (Pub/Sub emulator with
// an ordering key per object, push delivery, functions-framework) — 20 rounds of 10 updates within
// a second, each a higher value; a watch on ConfigMaps opened before the first update records
// every write of each child in order, and a local HTTP server stands for the cloud an effect
// writes to, recording every write: the values never decrease and end on the last update. Each
// function runs as its generated identity with its admission policy in force; the policy's fence
// is also attacked directly with the function's own token.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { Watch } from "@kubernetes/client-node";
import { pino } from "pino";
import { z } from "zod";
import type { RunningBridge } from "../bridge/bridge.ts";
import { startPipeline, type Pipeline, type ReconcileRecord } from "../cli/local/pipeline.ts";
import { ApiError } from "../clients/kube-http.ts";
import { PARENT_GENERATION_ANNOTATION, PARENT_UID_LABEL } from "../core/event.ts";
import { isStaleRefusal } from "../core/fence.ts";
import { defineOperator, type Operator } from "../core/operator.ts";
import { ensureQueues, queueDefinitions } from "../emulator/queues.ts";
import { startLocalPubSub, type LocalPubSub } from "../emulator/pubsub.ts";
import type { QueueUrls } from "../emulator/types.ts";
import { lambdaHandler } from "../functions/adapters/lambda.ts";
import { startPoller, type Poller } from "../functions/adapters/poller.ts";
import { createKubeApi } from "../functions/runtime/kube-api-http.ts";
import { classify } from "../functions/runtime/outcome.ts";
import { givenSqsClient } from "../functions/runtime/sqs-client.ts";
import { crApi, ready, runtimeFor, startEnv, startTestBridge, waitFor, type Cr, type Env } from "./support/functions-environment.ts";
import { startLambdaEventSource, type EventSource } from "./support/lambda-event-source.ts";
import { OverlapRecorder } from "./support/overlaps.ts";

const GROUP = "stale.crdfn.dev";
const ROUNDS = 20;
const PER_ROUND = 10;
const LAST = ROUNDS * PER_ROUND;

/** Where the effects' "cloud" listens: set once the test's server is up, read by effects when they run. */
let cloudUrl = "";

const spec = z.object({ value: z.number().int().nonnegative() });
const childOf = (name: string, value: number) => ({ apiVersion: "v1", kind: "ConfigMap", metadata: { name: `${name}-out` }, data: { value: String(value) } });
const burst = (plural: string, kind: string) =>
  defineOperator({
    resource: { group: GROUP, version: "v1", plural, kind },
    spec,
    owns: [{ group: "", version: "v1", kind: "ConfigMap" }],
    reconcile: (b) => ({ children: [childOf(b.metadata.name, b.spec.value)] }),
  }) as Operator<unknown>;
/** The same, and an effect that writes the value outside the cluster (an idempotent PUT). */
const effectsBurst = (plural: string, kind: string) =>
  defineOperator({
    resource: { group: GROUP, version: "v1", plural, kind },
    spec,
    owns: [{ group: "", version: "v1", kind: "ConfigMap" }],
    finalizer: `${GROUP}/cloud`,
    async effects(b) {
      const response = await fetch(`${cloudUrl}/${b.metadata.name}`, { method: "PUT", body: String(b.spec.value) });
      if (!response.ok) throw new Error(`the cloud answered ${response.status}`);
    },
    finalize: () => ({ done: true }),
    reconcile: (b) => ({ children: [childOf(b.metadata.name, b.spec.value)] }),
  }) as Operator<unknown>;

const viaPoller = burst("pbursts", "PBurst");
const viaLambda = burst("lbursts", "LBurst");
const viaCloudRun = burst("cbursts", "CBurst");
const effectsViaPoller = effectsBurst("pefbursts", "PEfBurst");

/** Every write of every child, in the order the API server made them (one watch, resumed where it left off). */
class ChildWrites {
  readonly values = new Map<string, number[]>();
  #stopped = false;
  #abort: (() => void) | undefined;

  async start(env: Env): Promise<void> {
    const list = await env.core.listNamespacedConfigMap({ namespace: env.cluster.namespace, labelSelector: PARENT_UID_LABEL });
    let rv = list.metadata?.resourceVersion ?? "0";
    const watch = new Watch(env.cluster.kubeConfig);
    const open = async (): Promise<void> => {
      const request = await watch.watch(
        `/api/v1/namespaces/${env.cluster.namespace}/configmaps`,
        { resourceVersion: rv, labelSelector: PARENT_UID_LABEL, allowWatchBookmarks: true },
        (type: string, obj: { metadata?: { name?: string; resourceVersion?: string }; data?: Record<string, string> }) => {
          if (obj.metadata?.resourceVersion) rv = obj.metadata.resourceVersion;
          if ((type !== "ADDED" && type !== "MODIFIED") || obj.data?.value === undefined) return;
          const name = obj.metadata?.name ?? "";
          this.values.set(name, [...(this.values.get(name) ?? []), Number(obj.data.value)]);
        },
        () => {
          if (!this.#stopped) void open();
        },
      );
      this.#abort = () => request.abort();
    };
    await open();
  }

  stop(): void {
    this.#stopped = true;
    this.#abort?.();
  }
}

const regressions = (values: readonly number[]): number => values.filter((v, i) => i > 0 && v < values[i - 1]!).length;

describe("never backwards: a stale snapshot is never applied", { timeout: 900_000 }, () => {
  let env: Env;
  let bridge: RunningBridge;
  let poller: Poller;
  let source: EventSource;
  let pubsub: LocalPubSub;
  let pipeline: Pipeline;
  let cloud: Server;
  let lambdaQueues: QueueUrls;
  const writes = new ChildWrites();
  /** The effects' writes outside the cluster, per object, in the order they arrived. */
  const effected = new Map<string, number[]>();
  const recorder = new OverlapRecorder();
  const cloudRunRecords: ReconcileRecord[] = [];

  before(async () => {
    cloud = createServer((req, res) => {
      let body = "";
      req.on("data", (c: Buffer) => (body += c.toString("utf8")));
      req.on("end", () => {
        const name = (req.url ?? "/").slice(1);
        effected.set(name, [...(effected.get(name) ?? []), Number(body)]);
        res.end("ok");
      });
    });
    await new Promise<void>((r) => cloud.listen(0, "127.0.0.1", r));
    cloudUrl = `http://127.0.0.1:${(cloud.address() as AddressInfo).port}`;
    [env, pubsub] = await Promise.all([
      startEnv([viaPoller, viaLambda, effectsViaPoller], { file: import.meta.filename }),
      startLocalPubSub({ log: () => {} }),
    ]);
    lambdaQueues = await ensureQueues(env.sqs, queueDefinitions(`${env.cluster.namespace}-lambda`));
    const effectsQueues = await ensureQueues(env.sqs, queueDefinitions(`${env.cluster.namespace}-effects`));
    bridge = await startTestBridge(
      env,
      [
        `${GROUP}/v1/pbursts>v1/configmaps`,
        `${GROUP}/v1/lbursts>v1/configmaps@${lambdaQueues.fifo}`,
        `${GROUP}/v1/pefbursts>v1/configmaps@${effectsQueues.fifo}`,
      ].join(", "),
    );
    const pollerOn = (queueUrl: string, op: Operator<unknown>) =>
      startPoller({
        sqs: givenSqsClient(env.sqs),
        queueUrls: [queueUrl, queueUrl, queueUrl, queueUrl],
        runtime: recorder.wrap(runtimeFor(env, op)),
        batchSize: 10,
        waitTimeSeconds: 1,
        logger: env.logger,
        clock: () => new Date(),
      });
    const pollers = [pollerOn(env.cluster.sqs.queues.fifo, viaPoller), pollerOn(effectsQueues.fifo, effectsViaPoller)];
    poller = { stop: async () => void (await Promise.all(pollers.map((p) => p.stop()))) };
    const handler = lambdaHandler(viaLambda, { runtime: recorder.wrap(runtimeFor(env, viaLambda)), sqs: env.sqs, logger: env.logger, clock: () => new Date() });
    source = startLambdaEventSource(env.sqs, lambdaQueues.fifo, handler, 3);
    pipeline = await startPipeline({
      cluster: env.cluster,
      pubsub,
      operators: [viaCloudRun],
      logger: pino({ level: "silent" }),
      functionLogLevel: "silent",
      onReconcile: (r) => cloudRunRecords.push(r),
      identities: { namespaces: [env.cluster.namespace], project: "stale" },
    });
    await writes.start(env);
  });
  after(async () => {
    writes.stop();
    await source?.stop();
    await poller?.stop();
    await pipeline?.stop();
    await bridge?.stop(1000);
    await pubsub?.stop();
    await env?.cluster.stop();
    await new Promise((r) => cloud?.close(r));
  });

  const converged = async (op: Operator<unknown>, name: string, value: number): Promise<boolean> => {
    const cr: Cr | undefined = await crApi(env, op).get(name);
    if (cr?.spec?.value !== value || ready(cr)?.status !== "True" || cr.status?.observedGeneration !== cr.metadata?.generation) return false;
    const child = await env.core.readNamespacedConfigMap({ name: `${name}-out`, namespace: env.cluster.namespace }).catch(() => undefined);
    return child?.data?.value === String(value);
  };

  /** 20 rounds of 10 updates, each a higher value, sent as fast as the API server takes them; converged after each round. */
  async function rounds(path: string, op: Operator<unknown>, name: string): Promise<number[]> {
    const crs = crApi(env, op);
    await crs.create(name, { value: 0 });
    await waitFor(`${path}: created`, () => converged(op, name, 0), 60_000);
    const burstMs: number[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      const started = performance.now();
      for (let i = 1; i <= PER_ROUND; i++) await crs.patchSpec(name, { value: r * PER_ROUND + i });
      burstMs.push(performance.now() - started);
      await waitFor(`${path}: round ${r + 1} converged`, () => converged(op, name, (r + 1) * PER_ROUND), 120_000);
    }
    return burstMs;
  }

  const conflictsOf = (name: string) => env.logs.filter((l) => l.msg === "409 Conflict; re-reading" && l.object === `${env.cluster.namespace}/${name}`).length;

  it(
    `${ROUNDS} rounds of ${PER_ROUND} updates within a second: on every path, every write of the child and of the effect only moves forward`,
    { timeout: 840_000 },
    async () => {
      const paths: Array<[string, Operator<unknown>, string]> = [
        ["poller", viaPoller, "on-poller"],
        ["lambda", viaLambda, "on-lambda"],
        ["cloud run", viaCloudRun, "on-cloud-run"],
        ["poller, effects", effectsViaPoller, "with-effects"],
      ];
      const bursts = await Promise.all(paths.map(([path, op, name]) => rounds(path, op, name)));
      for (const [i, [path, , name]] of paths.entries()) {
        const values = writes.values.get(`${name}-out`) ?? [];
        const results =
          path === "cloud run"
            ? cloudRunRecords.filter((r) => r.name === name).map((r) => r.outcome.result)
            : recorder.reconciles.filter((r) => r.name === name).map((r) => r.result);
        const reconciles = `${results.length} reconciles (${Object.entries(Object.groupBy(results, (r) => r))
          .map(([r, n]) => `${r} ${n?.length ?? 0}`)
          .join(", ")})`;
        const conflicts = path === "cloud run" ? "n/a (its logs are its own)" : String(conflictsOf(name));
        const raises = values.filter((v, j) => j > 0 && v === values[j - 1]).length;
        const slowest = Math.max(...bursts[i]!);
        console.log(
          `# ${path}: ${ROUNDS * PER_ROUND} updates (slowest burst of ${PER_ROUND}: ${slowest.toFixed(0)} ms): ${values.length} child writes (${raises} of them the same value: fence raises), ${reconciles}, ${conflicts} conflicts re-read, ${regressions(values)} regressions`,
        );
        assert.equal(regressions(values), 0, `${path}: the child's values as written: ${values.join(", ")}`);
        assert.equal(values.at(-1), LAST, `${path}: the last write is the last update`);
      }
      const outside = effected.get("with-effects") ?? [];
      console.log(`# effects: ${outside.length} writes outside the cluster, ${regressions(outside)} regressions`);
      assert.equal(regressions(outside), 0, `the effect's values as written: ${outside.join(", ")}`);
      assert.equal(outside.at(-1), LAST);
      assert.deepEqual(recorder.overlaps, [], "one reconcile of an object at a time");
    },
  );

  it("the admission policy refuses the function's own token a child from an older generation of its parent; the runtime reads it as a conflict", async () => {
    const crs = crApi(env, viaPoller);
    const name = "attacked";
    await crs.create(name, { value: 1 });
    for (let value = 2; value <= 3; value++) await crs.patchSpec(name, { value });
    await waitFor("converged at generation 3", () => converged(viaPoller, name, 3), 60_000);
    const parent = (await crs.get(name))!;
    const ref = { group: "", version: "v1", plural: "configmaps", namespace: env.cluster.namespace, name: `${name}-out` };
    const stored = await env.api.get(ref);
    assert.equal(
      (stored?.metadata.annotations as Record<string, string> | undefined)?.[PARENT_GENERATION_ANNOTATION],
      String(parent.metadata?.generation),
      "the child carries its parent's generation",
    );
    const asTheFunction = createKubeApi({ connection: env.identities!.functionConnection(viaPoller) });
    const written = (generation: string | undefined, value: number) => ({
      ...childOf(name, value),
      metadata: {
        name: `${name}-out`,
        namespace: env.cluster.namespace,
        labels: { [PARENT_UID_LABEL]: parent.metadata?.uid ?? "" },
        ownerReferences: [{ apiVersion: `${GROUP}/v1`, kind: "PBurst", name, uid: parent.metadata?.uid ?? "", controller: true, blockOwnerDeletion: true }],
        ...(generation === undefined ? {} : { annotations: { [PARENT_GENERATION_ANNOTATION]: generation } }),
      },
    });
    const generation = parent.metadata?.generation ?? 0;
    for (const [what, body] of [
      ["an older generation", written(String(generation - 1), 1)],
      ["no generation at all", written(undefined, 1)],
    ] as const) {
      const refusal = await asTheFunction.apply(ref, body, viaPoller.fieldManager).then(
        () => assert.fail(`${what}: applied`),
        (e: unknown) => e,
      );
      assert.ok(refusal instanceof ApiError && refusal.code === 403 && isStaleRefusal(refusal), `${what}: ${String(refusal)}`);
      assert.match(refusal.message, new RegExp(`configmaps ${name}-out was applied from generation ${generation}, not`));
      assert.deepEqual(classify(refusal), { kind: "conflict" });
    }
    assert.equal(((await env.api.get(ref))?.data as Record<string, string> | undefined)?.value, "3", "the child is as it was");
    // The same generation passes (a redelivery), and so would a newer one.
    await asTheFunction.apply(ref, written(String(generation), 3), viaPoller.fieldManager);
  });
});
