// A hung or restarting API server is an outage, never a broken object nor a bad credential.
// The whole pipeline runs as deployed: the bridge with its own ServiceAccount's token,
// the functions with theirs, on both consumers (the local poller, and the Lambda adapter behind a
// stand-in for Lambda's event source), with requeueing objects ticking (a chain each) and one
// idle object whose change is timed.
//  * kube-apiserver SIGSTOPped (it accepts connections and answers nothing) for longer than the
//    client's 15 s timeout and the bridge's watch silence, then SIGCONTed;
//  * kube-apiserver SIGKILLed and started again on the same port and etcd (its first answers to
//    ServiceAccounts are 403 while its RBAC warms up).
// After each: nothing dead-lettered, no reconcile begun during the outage spent a receive (each
// was deferred as "unavailable"), every chain ticks again, the bridge never said its credential
// was refused, and a change written 1 s after the server answers again is reconciled within
// RATIO × the same change's latency measured before the outage, plus two waits the design
// allows: the functions' circuit's longest wait for its probe (2 s, +20 % jitter), and the
// bridge's longest wait before it lists a kind again that a starting server did not yet serve
// (2 s: its 404 is the server's, before it has loaded the CRDs).
//
// Scale: the hang lasts 45 s (CRDFN_TEST_HANG_SECONDS=300: five minutes), 10 tickers per
// consumer (CRDFN_TEST_HANG_TICKERS); the restart's outage 10 s, once (CRDFN_TEST_HANG_RESTARTS=5
// measures a median of five). Longer hangs only repeat the
// cycle: the probe times out after 15 s, deferrals re-send before a message's last receive.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { loadavg } from "node:os";
import { z } from "zod";
import { defineOperator, type Operator } from "../core/operator.ts";
import type { RunningBridge } from "../bridge/bridge.ts";
import { ensureQueues, queueDefinitions } from "../emulator/queues.ts";
import type { QueueUrls } from "../emulator/types.ts";
import { lambdaHandler } from "../functions/adapters/lambda.ts";
import type { Poller } from "../functions/adapters/poller.ts";
import { crApi, pollerFor, ready, receiveAll, runtimeFor, startEnv, startTestBridge, waitFor, type Cr, type Env } from "./support/functions-environment.ts";
import { eventually } from "./support/eventually.ts";
import { startLambdaEventSource, type EventSource } from "./support/lambda-event-source.ts";
import { OverlapRecorder } from "./support/overlaps.ts";

/** The tickers' requeue period (CRDFN_TEST_HANG_PERIOD). */
const PERIOD_SECONDS = Number(process.env.CRDFN_TEST_HANG_PERIOD ?? 5);
const spec = z.object({ mode: z.enum(["plain", "tick"]), label: z.string().optional() });
const workers = (plural: string, kind: string) =>
  defineOperator({
    resource: { group: "test.crdfn.dev", version: "v1", plural, kind },
    spec,
    owns: [{ group: "", version: "v1", kind: "ConfigMap" }],
    reconcile(w) {
      return {
        children: [{ apiVersion: "v1", kind: "ConfigMap", metadata: { name: `${w.metadata.name}-${plural}` }, data: { label: w.spec.label ?? "" } }],
        status: { label: w.spec.label ?? "" },
        ...(w.spec.mode === "tick" ? { requeueAfterSeconds: PERIOD_SECONDS } : {}),
      };
    },
  }) as Operator<unknown>;
const viaPoller = workers("hpworkers", "HPWorker");
const viaLambda = workers("hlworkers", "HLWorker");
const paths = [
  ["poller", viaPoller],
  ["lambda", viaLambda],
] as const;

const HANG_MS = Number(process.env.CRDFN_TEST_HANG_SECONDS ?? 45) * 1000;
const RESTART_OUTAGE_MS = 10_000;
/** CRDFN_TEST_HANG_RESTARTS=5: a median of five restarts. */
const RESTARTS = Number(process.env.CRDFN_TEST_HANG_RESTARTS ?? 1);
const TICKERS = Number(process.env.CRDFN_TEST_HANG_TICKERS ?? 10);
/** The change after the outage may take this many times its latency before it… */
const RATIO = 5;
/** …plus the functions' circuit's longest open period with its jitter (functions/adapters/settle.ts, createCircuit's maxMs)… */
const CIRCUIT_MAX_MS = 2400;
/** …plus the bridge's longest wait before listing a kind not yet served (bridge/reflector.ts, NOT_SERVED_RETRY_MS). */
const RELIST_MAX_MS = 2000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("a hung or restarting API server is an outage", { timeout: 900_000 }, () => {
  let env: Env;
  let bridge: RunningBridge;
  let poller: Poller;
  let source: EventSource;
  let lambdaQueues: QueueUrls;
  const recorder = new OverlapRecorder();
  const converged = (cr: Cr | undefined, label?: string) =>
    ready(cr)?.status === "True" && cr?.status?.observedGeneration === cr?.metadata?.generation && (label === undefined || cr?.status?.label === label);
  const tickers = Array.from({ length: TICKERS }, (_, i) => `ticker-${i}`);

  before(async () => {
    // It stops the API server: servers of its own.
    env = await startEnv([viaPoller, viaLambda], { file: import.meta.filename, own: true });
    lambdaQueues = await ensureQueues(env.sqs, queueDefinitions("hang-lambda-events"));
    bridge = await startTestBridge(
      env,
      `test.crdfn.dev/v1/hpworkers>v1/configmaps@${env.cluster.sqs.queues.fifo}, test.crdfn.dev/v1/hlworkers>v1/configmaps@${lambdaQueues.fifo}`,
      { asDeployed: true },
    );
    poller = pollerFor(env, recorder.wrap(runtimeFor(env, viaPoller)), "queue", 2);
    const handler = lambdaHandler(viaLambda, { runtime: recorder.wrap(runtimeFor(env, viaLambda)), sqs: env.sqs, logger: env.logger, clock: () => new Date() });
    source = startLambdaEventSource(env.sqs, lambdaQueues.fifo, handler, 3);
    for (const [, op] of paths) {
      const crs = crApi(env, op);
      for (const name of tickers) await crs.create(name, { mode: "tick" });
      await crs.create("probe", { mode: "plain" });
    }
    for (const [path, op] of paths)
      await waitFor(
        `${path}: all converged`,
        async () => (await Promise.all([...tickers, "probe"].map((n) => crApi(env, op).get(n)))).every((cr) => converged(cr)),
        120_000,
      );
  });
  after(async () => {
    await source?.stop();
    await poller?.stop();
    await bridge?.stop(1000);
    await env?.cluster.stop();
  });

  /** ms from writing the probe's label (retried until the API server takes it) to its reconcile, per path. */
  const changeLatency = async (label: string): Promise<Record<string, number>> => {
    const took: Record<string, number> = {};
    await Promise.all(
      paths.map(async ([path, op]) => {
        const crs = crApi(env, op);
        await eventually(() => crs.patchSpec("probe", { mode: "plain", label }), { timeoutMs: 30_000, intervalMs: 100 });
        // The clock starts when the change is written AND the API server can serve a watch of the
        // kind: after a restart its watch cache for a custom resource initializes on its own time
        // (LIST/WATCH answer 429 "storage is (re)initializing" meanwhile, while writes already go to
        // etcd), which no client can hurry; the bridge retries within 1.5 s once it can.
        await eventually(
          () =>
            env.custom.listNamespacedCustomObject({
              group: op.resource.group,
              version: op.resource.version,
              plural: op.resource.plural,
              namespace: env.cluster.namespace,
              resourceVersion: "0",
              limit: 1,
            }),
          { timeoutMs: 30_000, intervalMs: 50 },
        );
        const writtenAt = Date.now();
        await eventually(async () => assert.ok(converged(await crs.get("probe"), label), `${path}: ${label} reconciled`), {
          timeoutMs: 60_000,
          intervalMs: 25,
        });
        took[path] = Date.now() - writtenAt;
      }),
    );
    return took;
  };

  /** Everything a recovered pipeline must show after an outage from `from` until `backAt`. */
  const recovered = async (what: string, from: number, backAt: number, baseline: Record<string, number>): Promise<Record<string, number>> => {
    await sleep(Math.max(0, backAt + 1000 - Date.now()));
    const afterMs = await changeLatency(`after-${what}`);
    console.log(
      `# ${what}: change 1 s after the return reconciled in ${JSON.stringify(afterMs)} ms; before the outage ${JSON.stringify(baseline)} ms; load ${loadavg()
        .map((l) => l.toFixed(1))
        .join(" ")}`,
    );
    for (const [path] of paths) {
      const bound = RATIO * (baseline[path] ?? 0) + CIRCUIT_MAX_MS + RELIST_MAX_MS;
      assert.ok(
        (afterMs[path] ?? Infinity) <= bound,
        `${path}: ${afterMs[path]} ms after the outage > ${RATIO} × ${baseline[path]} ms + ${CIRCUIT_MAX_MS} + ${RELIST_MAX_MS} ms`,
      );
    }
    const recoveredAt = Date.now();
    await waitFor(
      `${what}: every chain ticks again`,
      () =>
        paths.every(([, op]) =>
          tickers.every((n) =>
            recorder.reconciles.some((r) => r.key.includes(`/${op.resource.plural}/`) && r.name === n && r.startedAt >= recoveredAt && r.result === "success"),
          ),
        ),
      90_000,
    ).catch((e: unknown) => {
      const silent = paths.flatMap(([path, op]) =>
        tickers
          .filter((n) => !recorder.reconciles.some((r) => r.key.includes(`/${op.resource.plural}/`) && r.name === n && r.startedAt >= recoveredAt))
          .map((n) => `${path}/${n}`),
      );
      throw new Error(`${(e as Error).message}; silent: ${silent.join(", ")}`);
    });
    console.log(`# ${what}: every chain ticking again ${((Date.now() - backAt) / 1000).toFixed(1)} s after the return`);
    // Each chain's first tick after the return, so that one left far behind the others is named.
    const resumed = paths
      .flatMap(([path, op]) =>
        tickers.map((n) => {
          const first = recorder.reconciles.find(
            (r) => r.key.includes(`/${op.resource.plural}/`) && r.name === n && r.startedAt >= backAt && r.result === "success",
          );
          return { chain: `${path}/${n}`, s: ((first?.startedAt ?? Infinity) - backAt) / 1000 };
        }),
      )
      .sort((a, b) => a.s - b.s);
    const at = (q: number) => resumed[Math.min(resumed.length - 1, Math.floor(q * resumed.length))]!;
    console.log(
      `# ${what}: chains resumed ${resumed[0]!.s.toFixed(1)} s (first), ${at(0.5).s.toFixed(1)} s (median), ${resumed.at(-1)!.s.toFixed(1)} s (last: ${resumed
        .slice(-2)
        .map((r) => `${r.chain} ${r.s.toFixed(1)} s`)
        .join(", ")}) after the return`,
    );
    // No receive spent on the outage: what began during it was deferred as unavailable.
    const spent = recorder.reconciles.filter((r) => r.startedAt >= from && r.startedAt < backAt && r.result !== "unavailable" && r.result !== "success");
    assert.deepEqual(
      spent.map((r) => `${r.key} ${r.result} receive ${r.receiveCount}`),
      [],
      "a reconcile during the outage spent a receive",
    );
    console.log(
      `# ${what}: reconciles begun during the outage: ${recorder.reconciles.filter((r) => r.startedAt >= from && r.startedAt < backAt).length}, all deferred as unavailable`,
    );
    assert.deepEqual(await receiveAll(env, env.cluster.sqs.queues.fifoDlq), [], "nothing dead-lettered (poller)");
    assert.deepEqual(await receiveAll(env, lambdaQueues.fifoDlq), [], "nothing dead-lettered (Lambda)");
    const refused = env.logs.filter((l) => String(l.msg).includes("refused the bridge's credential"));
    assert.deepEqual(refused, [], "the bridge took the outage for a refused credential");
    assert.deepEqual(recorder.overlaps, [], "one reconcile per object at a time");
    return afterMs;
  };

  it(`kube-apiserver hung (SIGSTOP) for ${HANG_MS / 1000} s: deferred, nothing dead-lettered, recovered at once`, { timeout: 600_000 }, async () => {
    const baseline = await changeLatency("before-hang");
    await waitFor("the tickers have their next tick scheduled", () => bridge.scheduledCount() >= TICKERS, 30_000);
    const from = Date.now();
    env.cluster.apiServer.pause();
    try {
      await sleep(HANG_MS);
    } finally {
      env.cluster.apiServer.resume();
    }
    await recovered("hang", from, Date.now(), baseline);
  });

  it(
    `kube-apiserver killed (SIGKILL) and started again after ${RESTART_OUTAGE_MS / 1000} s${RESTARTS > 1 ? `, ${RESTARTS} times` : ""}: its RBAC warm-up is no refused credential`,
    { timeout: 300_000 * RESTARTS },
    async () => {
      const returns: number[] = [];
      for (let i = 0; i < RESTARTS; i++) {
        const baseline = await changeLatency(`before-restart-${i}`);
        await waitFor("the tickers have their next tick scheduled", () => bridge.scheduledCount() >= TICKERS, 30_000);
        const from = Date.now();
        await env.cluster.apiServer.stop(0);
        await sleep(RESTART_OUTAGE_MS);
        await env.cluster.apiServer.start();
        const backAt = Date.now();
        const afterMs = await recovered(`restart-${i}`, from, backAt, baseline);
        returns.push(...Object.values(afterMs));
        console.log(
          `# restart-${i}: log lines naming a refusal while the API server was not ready: ${env.logs.filter((l) => Number(l.time) >= from && /not ready/.test(JSON.stringify(l.err ?? l.error ?? ""))).length}`,
        );
      }
      const sorted = [...returns].sort((a, b) => a - b);
      console.log(
        `# restarts: change 1 s after the return reconciled in ${JSON.stringify(returns)} ms (both paths); median ${sorted[Math.floor(sorted.length / 2)]} ms; load ${loadavg()
          .map((l) => l.toFixed(1))
          .join(" ")}`,
      );
    },
  );
});
