// One name created and deleted 20 times in a row: stale events for deleted uids, requeues
// of old generations and writes answered 404 must not keep the last object from converging.
// Real kube-apiserver + kube-controller-manager (garbage collection) + ElasticMQ + the real bridge
// + the local functions; every reconcile is triggered by the bridge.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import type { RunningBridge } from "../bridge/bridge.ts";
import type { Operator } from "../core/operator.ts";
import { startLocalFunctions } from "../functions/adapters/local.ts";
import type { Poller } from "../functions/adapters/poller.ts";
import greeting, { configMapName } from "../examples/greeting/operator.ts";
import { CLUSTER, crApi, ready, startEnv, startTestBridge, waitFor, type Cr, type Env } from "./support/functions-environment.ts";

const op = greeting as Operator<unknown>;
const CYCLES = 20;
const CONVERGE_MS = 5000;

describe("20 create/delete cycles of one name", { timeout: 600_000 }, () => {
  let env: Env;
  let bridge: RunningBridge;
  let poller: Poller;
  const crs = () => crApi(env, op);

  before(async () => {
    env = await startEnv([op], { file: import.meta.filename });
    bridge = await startTestBridge(env, "example.com/v1/greetings>v1/configmaps");
    poller = startLocalFunctions([op], {
      env: { ...env.cluster.env, CRDFN_CLUSTER: CLUSTER, LOG_LEVEL: "silent" },
      registry: env.registry,
      waitTimeSeconds: 1,
      visibilityTimeout: 2,
    });
  });
  after(async () => {
    await poller?.stop();
    await bridge?.stop();
    await env?.cluster.stop();
  });

  /** A create right after a delete may still meet the old object for a moment. */
  const create = async (name: string, message: string): Promise<Cr> => {
    for (;;) {
      try {
        return await crs().create(name, { message });
      } catch (e) {
        if ((e as { code?: number }).code !== 409) throw e;
        await new Promise((r) => setTimeout(r, 20));
      }
    }
  };

  /** Ready=True for the current generation, and its ConfigMap holds `message`, owned by `uid`. */
  const converged = async (name: string, uid: string, message: string): Promise<boolean> => {
    const cr = await crs().get(name);
    if (cr?.metadata?.uid !== uid || ready(cr)?.status !== "True" || cr.status?.observedGeneration !== cr.metadata.generation) return false;
    try {
      const cm = await env.core.readNamespacedConfigMap({ name: configMapName(name), namespace: env.cluster.namespace });
      const owners = cm.metadata?.ownerReferences ?? [];
      return cm.data?.message === message && owners.length === 1 && owners[0]?.uid === uid && owners[0]?.controller === true;
    } catch {
      return false;
    }
  };

  async function churn(name: string): Promise<number> {
    for (let i = 1; i <= CYCLES; i++) {
      const cr = await create(name, `cycle ${i}`);
      // Half the cycles let each object converge before deleting it, half delete it at once.
      if (i <= CYCLES / 2) await waitFor(`cycle ${i} converged`, () => converged(name, cr.metadata?.uid ?? "", `cycle ${i}`));
      await crs().delete(name);
    }
    const last = await create(name, "last");
    const started = Date.now();
    await waitFor(`the last ${name} converged`, () => converged(name, last.metadata?.uid ?? "", "last"), 60_000);
    return Date.now() - started;
  }

  it(`ends converged within ${CONVERGE_MS / 1000} s of the last create, over several rounds`, { timeout: 540_000 }, async () => {
    const figures: number[] = [];
    for (const name of ["churn-a", "churn-b", "churn-c"]) figures.push(await churn(name));
    console.log(`# time to converge after the last create (ms): ${figures.join(", ")}`);
    for (const ms of figures) assert.ok(ms <= CONVERGE_MS, `converged ${ms} ms after the last create (bound ${CONVERGE_MS} ms)`);
  });
});
