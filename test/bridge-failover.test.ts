// The bridge as the scheduler, across a failover: what the objects' status has due is rebuilt by
// the new leader from the objects themselves and fires on time, the settled rest is not
// re-announced, and an idle cluster sends nothing. Also: a cluster-scoped parent hears from its
// namespaced children. The objects' status is written here as the functions would write it.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { SQSClient } from "@aws-sdk/client-sqs";
import { stringify } from "yaml";
import { startBridge } from "../bridge/bridge.ts";
import type { LocalCluster } from "../emulator/types.ts";
import { bridgeConfig, bridgeEnv, spawnBridge, startBridgeEnvironment, testLogger, type BridgeProcess } from "./support/bridge-environment.ts";
import type { TestCluster } from "./support/test-cluster.ts";
import { crontab, crontabPath, ensureNamespace } from "./support/crontabs.ts";
import { kube, kubectl, ok } from "./support/kube-requests.ts";
import { scrapeMetrics } from "./support/metrics.ts";
import { parallel, withTimeout } from "./support/promises.ts";
import { QueueReader } from "./support/queue-reader.ts";
import { TEST_EVENT_KEY } from "./support/event-key.ts";

const OBJECTS = 1000;
const PENDING = 100;
/** The replicas' lease (the default is 8 s): a standby leads within about this long after a SIGKILL. */
const LEASE_SECONDS = 5;
/** How long the settled cluster is watched for messages; CRDFN_TEST_IDLE_SECONDS=600 for 10 minutes. */
const IDLE_SECONDS = Number(process.env.CRDFN_TEST_IDLE_SECONDS ?? 30);

async function leaseHolder(cluster: LocalCluster, name: string): Promise<string> {
  const r = await kube(cluster.kubeConfig, "GET", `/apis/coordination.k8s.io/v1/namespaces/crdfn-system/leases/${name}`);
  return r.status === 200 ? String((r.body.spec as { holderIdentity?: string } | undefined)?.holderIdentity ?? "") : "";
}

async function until(check: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out: ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** The status a function writes after a successful reconcile, with what it wants next. */
function settledStatus(generation: number, next?: { at: string; reason: string }): Record<string, unknown> {
  const now = new Date().toISOString().replace(/\.\d{3}Z$/, "Z");
  return {
    observedGeneration: generation,
    conditions: [{ type: "Ready", status: "True", reason: "Reconciled", message: "", observedGeneration: generation, lastTransitionTime: now }],
    ...(next ? { nextReconcile: next } : {}),
  };
}

describe("bridge: the schedule across a failover", { timeout: 510_000 + IDLE_SECONDS * 1000 }, () => {
  let env: Awaited<ReturnType<typeof startBridgeEnvironment>>;
  let cluster: TestCluster;
  let sqs: SQSClient;
  let reader: QueueReader;

  before(async () => {
    env = await startBridgeEnvironment({ file: import.meta.filename, namespaces: ["failover", "scoped-children"] });
    ({ cluster, sqs } = env);
    reader = new QueueReader(sqs, cluster.sqs.queues.fifo);
    await ensureNamespace(cluster, "crdfn-system");
  });
  after(async () => env?.stop());

  it(
    `leader SIGKILL with ${OBJECTS} settled objects, ${PENDING} of them with a retry or requeue due: each fires within its due time + 15 s, ≤ 10 others are announced, and idle sends nothing`,
    { timeout: 390_000 + IDLE_SECONDS * 1000 },
    async () => {
      const ns = cluster.ns("failover");
      const names = Array.from({ length: OBJECTS }, (_, i) => `ct-${i}`);
      const t0 = Date.now();
      const created = new Map<string, Awaited<ReturnType<typeof kube>>>();
      await parallel(names, 20, async (name) => {
        const c = await ok(kube(cluster.kubeConfig, "POST", crontabPath(ns), crontab(name)), name);
        created.set(name, c);
        const generation = (c.body.metadata as { generation: number }).generation;
        created.set(
          name,
          await ok(
            kube(cluster.kubeConfig, "PUT", `${crontabPath(ns, name)}/status?fieldManager=crdfn`, { ...c.body, status: settledStatus(generation) }),
            `${name} status`,
          ),
        );
      });
      console.log(`# ${OBJECTS} objects settled in ${((Date.now() - t0) / 1000).toFixed(1)} s`);

      const lease = "crdfn-failover";
      const replicas = new Map<string, BridgeProcess>();
      for (const id of ["replica-a", "replica-b"])
        replicas.set(
          id,
          spawnBridge(
            bridgeEnv(cluster, {
              CRDFN_NAMESPACES: ns,
              CRDFN_LEASE_NAME: lease,
              CRDFN_LEASE_NAMESPACE: "crdfn-system",
              CRDFN_LEASE_IDENTITY: id,
              CRDFN_LEASE_DURATION_SECONDS: String(LEASE_SECONDS),
            }),
          ),
        );
      try {
        // Two processes starting: a hang detector, not a speed bar (over 30 s beside another suite at load 20–35).
        await until(async () => (await leaseHolder(cluster, lease)) !== "", 180_000, "a leader");
        const leaderId = await leaseHolder(cluster, lease);
        const leader = replicas.get(leaderId)!;
        const standby = replicas.get(leaderId === "replica-a" ? "replica-b" : "replica-a")!;
        await withTimeout(leader.synced, 60_000, "leader sync");
        await reader.drain();
        const firstTerm = reader.all.length;
        assert.ok(firstTerm <= 10, `a new leader announced ${firstTerm} of ${OBJECTS} settled objects`);

        // What the functions record after a reconcile that wants another: a retry or requeue, due
        // 15–30 s from now (status-only writes: no event, a schedule), after the standby can lead
        // (one lease duration and a retry). The set-up's speed does not matter: the due times start
        // from here, and the leader is killed right after.
        const pendingAt = Date.now();
        const dueAt = new Map<string, number>();
        await parallel(names.slice(0, PENDING), 20, async (name, i) => {
          const at = new Date(pendingAt + 15_000 + (i * 15_000) / PENDING);
          dueAt.set(name, at.getTime());
          const body = created.get(name)!.body;
          const generation = (body.metadata as { generation: number }).generation;
          await ok(
            kube(cluster.kubeConfig, "PUT", `${crontabPath(ns, name)}/status?fieldManager=crdfn`, {
              ...body,
              status: settledStatus(generation, { at: at.toISOString(), reason: i % 2 === 0 ? "Requeue" : "Retry" }),
            }),
            `${name} due`,
          );
        });
        assert.ok(Date.now() < Math.min(...dueAt.values()), "killed before the first due time");

        leader.child.kill("SIGKILL");
        const killedAt = Date.now();
        await until(
          async () => (await leaseHolder(cluster, lease)) === (leaderId === "replica-a" ? "replica-b" : "replica-a"),
          30_000,
          "the standby takes over",
        );
        console.log(`# standby leads ${((Date.now() - killedAt) / 1000).toFixed(1)} s after the SIGKILL`);
        await reader.until(
          () =>
            [...dueAt.keys()].every((n) =>
              reader
                .byName(ns)
                .get(n)
                ?.some((e) => e.reason === "requeue" || e.reason === "retry"),
            ),
          150_000,
          () =>
            `${
              [...dueAt.keys()].filter(
                (n) =>
                  !reader
                    .byName(ns)
                    .get(n)
                    ?.some((e) => e.reason === "requeue" || e.reason === "retry"),
              ).length
            } not fired`,
        );

        const late: string[] = [];
        const early: string[] = [];
        let worst = 0;
        for (const r of reader.all) {
          const due = dueAt.get(r.event.name);
          if (due === undefined || (r.event.reason !== "requeue" && r.event.reason !== "retry")) continue;
          const lateness = r.sentAt - due;
          worst = Math.max(worst, lateness);
          if (lateness > 15_000) late.push(`${r.event.name} +${lateness} ms`);
          if (lateness < -1000) early.push(`${r.event.name} ${lateness} ms`);
        }
        console.log(`# ${PENDING} scheduled reconciles after the failover: the latest fired ${worst} ms after its due time`);
        assert.deepEqual(late, [], "each fires within its due time + 15 s");
        assert.deepEqual(early, [], "none fires early");
        const others = reader.all.filter((r) => !dueAt.has(r.event.name)).length;
        assert.ok(others <= 10, `${others} settled objects re-announced across the failover (≤ 10)`);
        console.log(`# settled objects announced: first leader ${firstTerm}, across the failover ${others}`);

        // Idle: nothing changes, nothing is due: nothing is sent.
        const port = await standby.port;
        const sendsBefore = (await scrapeMetrics(port)).get("crdfn_bridge_send_requests_total") ?? 0;
        const before = reader.all.length;
        await new Promise((r) => setTimeout(r, IDLE_SECONDS * 1000));
        await reader.drain();
        const sendsAfter = (await scrapeMetrics(port)).get("crdfn_bridge_send_requests_total") ?? 0;
        console.log(`# ${OBJECTS} settled objects, ${IDLE_SECONDS} s idle: ${reader.all.length - before} messages, ${sendsAfter - sendsBefore} send requests`);
        assert.equal(reader.all.length - before, 0, "an idle cluster sends no messages");
        assert.equal(sendsAfter - sendsBefore, 0);
      } finally {
        for (const r of replicas.values()) r.child.kill("SIGKILL");
      }
    },
  );

  it("a cluster-scoped parent hears from its namespaced children: deleting one re-announces it within 5 s", { timeout: 90_000 }, async () => {
    const dir = mkdtempSync(join(tmpdir(), "crdfn-cluster-scoped-"));
    const crd = {
      apiVersion: "apiextensions.k8s.io/v1",
      kind: "CustomResourceDefinition",
      metadata: { name: "clusterthings.test.crdfn.dev" },
      spec: {
        group: "test.crdfn.dev",
        names: { plural: "clusterthings", singular: "clusterthing", kind: "ClusterThing" },
        scope: "Cluster",
        versions: [
          {
            name: "v1",
            served: true,
            storage: true,
            schema: { openAPIV3Schema: { type: "object", "x-kubernetes-preserve-unknown-fields": true } },
            subresources: { status: {} },
          },
        ],
      },
    };
    writeFileSync(join(dir, "crd.yaml"), stringify(crd));
    kubectl(cluster, "apply", "--server-side", "-f", join(dir, "crd.yaml"));
    kubectl(cluster, "wait", "--for=condition=Established", "--timeout=30s", "crd/clusterthings.test.crdfn.dev");
    rmSync(dir, { recursive: true, force: true });
    const ns = cluster.ns("scoped-children");
    const parent = await ok(
      kube(cluster.kubeConfig, "POST", "/apis/test.crdfn.dev/v1/clusterthings", {
        apiVersion: "test.crdfn.dev/v1",
        kind: "ClusterThing",
        metadata: { name: "big" },
        spec: {},
      }),
      "parent",
    );
    const uid = (parent.body.metadata as { uid: string }).uid;
    const reader2 = new QueueReader(sqs, cluster.sqs.queues.fifo);
    await reader2.drain();
    const bridge = startBridge(bridgeConfig(cluster, { CRDFN_RESOURCES: "test.crdfn.dev/v1/clusterthings>v1/configmaps" }), {
      eventKey: TEST_EVENT_KEY,
      kubeConfig: cluster.kubeConfig,
      sqs,
      logger: testLogger(),
    });
    try {
      await bridge.ready;
      // The parent's first announcement is sent before the child exists: until it is sent, a
      // child's announcement joins it (one message per object), and no "child" event would be seen.
      await reader2.until(
        () => reader2.all.some((r) => r.event.name === "big"),
        30_000,
        () => JSON.stringify(reader2.all.map((r) => [r.event.name, r.event.reason])),
      );
      // Labelled as the functions label every child they apply: the bridge watches only those.
      const child = {
        apiVersion: "v1",
        kind: "ConfigMap",
        metadata: {
          name: "part",
          namespace: ns,
          labels: { "crdfn.io/parent-uid": uid },
          ownerReferences: [{ apiVersion: "test.crdfn.dev/v1", kind: "ClusterThing", name: "big", uid, controller: true }],
        },
        data: { a: "b" },
      };
      await ok(kube(cluster.kubeConfig, "POST", `/api/v1/namespaces/${ns}/configmaps`, child), "child");
      const childEvents = () => reader2.all.filter((r) => r.event.name === "big" && r.event.namespace === undefined && r.event.reason === "child");
      await reader2.until(
        () => childEvents().length >= 1,
        10_000,
        () => JSON.stringify(reader2.all.map((r) => [r.event.name, r.event.reason])),
      );
      const deletedAt = Date.now();
      await ok(kube(cluster.kubeConfig, "DELETE", `/api/v1/namespaces/${ns}/configmaps/part`), "delete child");
      await reader2.until(
        () => childEvents().length >= 2,
        5000,
        () => JSON.stringify(reader2.all.map((r) => [r.event.name, r.event.reason])),
      );
      console.log(`# the cluster-scoped parent was announced ${Date.now() - deletedAt} ms after its namespaced child's deletion`);
    } finally {
      await bridge.stop(1000);
    }
  });
});
