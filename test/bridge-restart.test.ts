import { describe, it, before, after } from "node:test";
import assert from "node:assert/strict";
import type { SQSClient } from "@aws-sdk/client-sqs";
import { Registry } from "prom-client";
import { startBridge } from "../bridge/bridge.ts";
import { kubeConfigVia, Relay } from "./support/api-relay.ts";
import { bridgeConfig, bridgeEnv, type BridgeProcess, spawnBridge, startBridgeEnvironment, testLogger } from "./support/bridge-environment.ts";
import type { TestCluster } from "./support/test-cluster.ts";
import { crontab, crontabPath } from "./support/crontabs.ts";
import { kube, ok, rvOf } from "./support/kube-requests.ts";
import { metricValue } from "./support/metrics.ts";
import { parallel, withTimeout } from "./support/promises.ts";
import { type Expected, mismatches, orderViolations, QueueReader } from "./support/queue-reader.ts";

/** A hang detector, not a speed bar: a bridge's first sync of 500 objects took over 30 s beside another suite at load 20–35. */
const SYNC_LIMIT_MS = 180_000;
import { TEST_EVENT_KEY } from "./support/event-key.ts";

const HOLD = "test.crdfn.dev/hold";
const mergePatch = "application/merge-patch+json";

describe("bridge: restarts and 410 Gone", { timeout: 900_000 }, () => {
  let env: Awaited<ReturnType<typeof startBridgeEnvironment>>;
  let cluster: TestCluster;
  let sqs: SQSClient;
  let reader: QueueReader;

  before(async () => {
    // It restarts the API server: servers of its own.
    env = await startBridgeEnvironment({ file: import.meta.filename, own: true, namespaces: ["killed", "gone"] });
    ({ cluster, sqs } = env);
    reader = new QueueReader(sqs, cluster.sqs.queues.fifo);
  });

  after(async () => env?.stop());

  it("killed with SIGKILL in the middle of churn and restarted: every object's latest state is published (0 lost)", { timeout: 600_000 }, async () => {
    const ns = cluster.ns("killed");
    const kc = cluster.kubeConfig;
    // No function answers here, so a start window would hold all but its first objects for its
    // 60 s timeout (the window has its own tests in bridge-start-work): this test is about loss.
    const env = bridgeEnv(cluster, { CRDFN_NAMESPACES: ns, CRDFN_START_WINDOW: "0" });
    const first = spawnBridge(env);
    let second: BridgeProcess | undefined;
    try {
      await withTimeout(first.synced, SYNC_LIMIT_MS, () => `first bridge sync; logs: ${first.logs.join("\n")}`);

      const names = Array.from({ length: 500 }, (_, i) => `ct-${i}`);
      const expected = new Map<string, Expected>();
      const set = (name: string, r: { body: { metadata?: { resourceVersion?: string } } }) =>
        expected.set(name, { deleted: false, resourceVersion: r.body.metadata?.resourceVersion ?? "" });
      // Every tenth object carries a finalizer, as an operator with cleanup would.
      await parallel(names, 20, async (name, i) => {
        const body = crontab(name) as { metadata: { finalizers?: string[] } };
        if (i % 10 === 0) body.metadata.finalizers = [HOLD];
        set(name, await ok(kube(kc, "POST", crontabPath(ns), body), `create ${name}`));
      });

      // Phase A: updates, with the bridge SIGKILLed half-way through.
      let done = 0;
      await parallel(names, 20, async (name) => {
        set(name, await ok(kube(kc, "PATCH", crontabPath(ns, name), { spec: { replicas: 2 } }, mergePatch), `update ${name}`));
        if (++done === 250) first.child.kill("SIGKILL");
      });
      assert.equal(await withTimeout(first.exited, 10_000, "killed bridge exit"), null, "died by signal");

      // Phase B: changes while no bridge runs at all.
      const deletedWhileDown = new Set<string>();
      await parallel(names.slice(0, 100), 20, async (name) =>
        set(name, await ok(kube(kc, "PATCH", crontabPath(ns, name), { spec: { replicas: 3 } }, mergePatch), `update ${name}`)),
      );
      await parallel(names.slice(400), 20, async (name, i) => {
        const r = await ok(kube(kc, "DELETE", crontabPath(ns, name)), `delete ${name}`);
        // With a finalizer the object lives on, marked for deletion: that state must be published.
        if (i % 10 === 0) set(name, r);
        else {
          expected.delete(name);
          deletedWhileDown.add(name);
        }
      });

      // Phase C: a fresh bridge, and churn continuing around its start.
      const restarted = spawnBridge(env);
      second = restarted;
      await parallel(names.slice(100, 200), 20, async (name) =>
        set(name, await ok(kube(kc, "PATCH", crontabPath(ns, name), { spec: { replicas: 4 } }, mergePatch), `update ${name}`)),
      );
      await withTimeout(second.synced, SYNC_LIMIT_MS, () => `second bridge sync; logs: ${restarted.logs.join("\n")}`);
      await parallel(names.slice(300, 350), 20, async (name, i) => {
        const r = await ok(kube(kc, "DELETE", crontabPath(ns, name)), `delete ${name}`);
        if (i % 10 === 0) set(name, r);
        else expected.set(name, { deleted: true });
      });

      await reader.until(
        () => mismatches(reader.byName(ns), expected).length === 0,
        60_000,
        () => mismatches(reader.byName(ns), expected).slice(0, 5).join("; "),
      );
      assert.deepEqual(orderViolations(reader.byName(ns)), []);
      // Objects deleted outright while no bridge ran cannot be announced by anyone (there is
      // nothing left to list); their last announced state is an older version, and a function
      // reading it finds them gone. Cleanup that must happen uses a finalizer, as above.
      assert.equal(deletedWhileDown.size, 90);
      restarted.child.kill("SIGTERM");
      assert.equal(await withTimeout(restarted.exited, 15_000, "SIGTERM exit"), 0, "SIGTERM flushes and exits 0");
    } finally {
      first.child.kill("SIGKILL");
      second?.child.kill("SIGKILL");
    }
  });

  it(
    "a forced 410 (watch from a resourceVersion the API server no longer has): relist, 0 lost, DELETED for objects removed while away",
    { timeout: 300_000 },
    async () => {
      const ns = cluster.ns("gone");
      const kc = cluster.kubeConfig;
      const names = Array.from({ length: 50 }, (_, i) => `ct-${i}`);
      const expected = new Map<string, Expected>();
      await parallel(names, 10, async (name) =>
        expected.set(name, { deleted: false, resourceVersion: rvOf(await ok(kube(kc, "POST", crontabPath(ns), crontab(name)), name)) }),
      );

      const relay = new Relay(Number(new URL(cluster.server).port));
      await relay.open();
      const registry = new Registry();
      const bridge = startBridge(bridgeConfig(cluster, { CRDFN_NAMESPACES: ns }), {
        eventKey: TEST_EVENT_KEY,
        kubeConfig: kubeConfigVia(kc, relay.port),
        sqs,
        logger: testLogger(),
        registry,
      });
      try {
        await withTimeout(bridge.ready, SYNC_LIMIT_MS, "bridge sync");
        await reader.until(() => mismatches(reader.byName(ns), expected).length === 0, 30_000);

        // The bridge goes away; the world changes without it.
        await relay.cut();
        await parallel(names.slice(0, 10), 10, async (name) => {
          await ok(kube(kc, "DELETE", crontabPath(ns, name)), name);
          expected.set(name, { deleted: true });
        });
        await parallel(names.slice(10, 20), 10, async (name) =>
          expected.set(name, {
            deleted: false,
            resourceVersion: rvOf(await ok(kube(kc, "PATCH", crontabPath(ns, name), { spec: { replicas: 5 } }, mergePatch), name)),
          }),
        );
        for (const name of ["new-0", "new-1", "new-2"])
          expected.set(name, { deleted: false, resourceVersion: rvOf(await ok(kube(kc, "POST", crontabPath(ns), crontab(name)), name)) });
        // A restarted API server keeps no history from before its start: the bridge's resourceVersion is gone.
        await cluster.apiServer.stop();
        await cluster.apiServer.start();
        await relay.open();

        await reader.until(
          () => mismatches(reader.byName(ns), expected).length === 0,
          90_000,
          () => mismatches(reader.byName(ns), expected).slice(0, 5).join("; "),
        );
        assert.ok((await metricValue(registry, "crdfn_bridge_relists_total", { reason: "gone" })) >= 1, "the watch got 410 and relisted");
        const deletions = reader.all.filter((r) => r.event.namespace === ns && r.event.type === "DELETED");
        assert.deepEqual(
          deletions.map((r) => r.event.reason),
          Array<string>(10).fill("relist"),
        );
        assert.deepEqual(orderViolations(reader.byName(ns)), []);
      } finally {
        await bridge.stop(1000);
        await relay.cut();
      }
    },
  );
});
