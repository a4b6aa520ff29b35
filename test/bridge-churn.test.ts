import { describe, it, before, after } from "node:test";
import assert from "node:assert/strict";
import type { SQSClient } from "@aws-sdk/client-sqs";
import { startBridge, type RunningBridge } from "../bridge/bridge.ts";
import { MAX_EVENT_BYTES } from "../core/event.ts";
import { bridgeConfig, startBridgeEnvironment, testLogger } from "./support/bridge-environment.ts";
import type { TestCluster } from "./support/test-cluster.ts";
import { crontab, crontabPath } from "./support/crontabs.ts";
import { kube, ok, rvOf } from "./support/kube-requests.ts";
import { metricValue } from "./support/metrics.ts";
import { parallel } from "./support/promises.ts";
import { type Expected, mismatches, orderViolations, QueueReader } from "./support/queue-reader.ts";
import { TEST_EVENT_KEY } from "./support/event-key.ts";
import { childMarkOf, reconciledRecord } from "../core/reconciled.ts";
import { eventually } from "./support/eventually.ts";

describe("bridge: churn against a real API server and ElasticMQ", { timeout: 240_000 }, () => {
  let env: Awaited<ReturnType<typeof startBridgeEnvironment>>;
  let cluster: TestCluster;
  let sqs: SQSClient;
  let bridge: RunningBridge;
  let reader: QueueReader;

  before(async () => {
    env = await startBridgeEnvironment({ file: import.meta.filename, namespaces: ["churn", "long", "children", "resync", "held"] });
    ({ cluster, sqs } = env);
    reader = new QueueReader(sqs, cluster.sqs.queues.fifo);
    bridge = startBridge(bridgeConfig(cluster), { eventKey: TEST_EVENT_KEY, kubeConfig: cluster.kubeConfig, sqs, logger: testLogger() });
    await bridge.ready;
  });

  after(async () => {
    await bridge?.stop(1000);
    await env?.stop();
  });

  it("500 objects created, updated and deleted: final states all published, in order, status-only writes add no event", { timeout: 150_000 }, async () => {
    const ns = cluster.ns("churn");
    const kc = cluster.kubeConfig;
    const names = Array.from({ length: 500 }, (_, i) => `ct-${i}`);
    const expected = new Map<string, Expected>();
    const statusRvs = new Set<string>();

    await parallel(names, 25, async (name) => {
      await ok(kube(kc, "POST", crontabPath(ns), crontab(name)), `create ${name}`);
      const updated = await ok(kube(kc, "PATCH", crontabPath(ns, name), { spec: { replicas: 2 } }, "application/merge-patch+json"), `update ${name}`);
      // A function's own status write: not news, so no event of its own; it may only bring an
      // announcement still waiting to be sent up to date (its newer version and body).
      const status = await ok(
        kube(kc, "PATCH", `${crontabPath(ns, name)}/status`, { status: { observedGeneration: 2, note: "reconciled" } }, "application/merge-patch+json"),
        `status ${name}`,
      );
      statusRvs.add(rvOf(status));
      expected.set(name, { deleted: false, resourceVersion: rvOf(updated), or: rvOf(status) });
    });
    await parallel(
      names.filter((_, i) => i % 5 === 0),
      25,
      async (name) => {
        await ok(kube(kc, "DELETE", crontabPath(ns, name)), `delete ${name}`);
        expected.set(name, { deleted: true });
      },
    );

    await reader.until(
      () => mismatches(reader.byName(ns), expected).length === 0,
      60_000,
      () => mismatches(reader.byName(ns), expected).slice(0, 5).join("; "),
    );
    // Everything the bridge had to publish is in the queue (what it still held would come later).
    await reader.until(() => bridge.pendingCount() === 0, 30_000);

    const events = reader.byName(ns);
    assert.deepEqual(mismatches(events, expected), [], "every object's final state is the last event of its group");
    assert.deepEqual(orderViolations(events), [], "per-object order kept");
    const perObject = [...events.values()].map((l) => l.filter((e) => e.type !== "DELETED").length);
    assert.ok(
      perObject.every((n) => n <= 2),
      `a create and an update are at most two events each, the status write adds none (most: ${Math.max(...perObject)})`,
    );
    const fromStatus = reader.all.filter((r) => statusRvs.has(r.event.resourceVersion));
    assert.ok(
      fromStatus.every((r) => r.event.reason === "watch" && r.event.object !== undefined),
      "a status write's version appears only in a waiting announcement it brought up to date",
    );
    // At least each object's final state; at most a create and an update each, and the 100 deletions
    // (coalescing merges more of them the slower the queue answers, so no tighter lower bound holds).
    const count = [...events.values()].reduce((n, l) => n + l.length, 0);
    assert.ok(count >= names.length && count <= 2 * names.length + 100, `${count} events`);
    for (const r of reader.all) assert.ok(Buffer.byteLength(JSON.stringify(r.event)) <= MAX_EVENT_BYTES);
    // One object, one FIFO group.
    const groups = new Map<string, Set<string>>();
    for (const r of reader.all) groups.set(r.event.name, (groups.get(r.event.name) ?? new Set()).add(r.groupId));
    for (const [name, g] of groups) assert.equal(g.size, 1, `${name} spans ${g.size} groups`);
  });

  it("a 253-character name keeps its group and deduplication ids within SQS limits", { timeout: 30_000 }, async () => {
    const ns = cluster.ns("long");
    const name = `${"a".repeat(63)}.${"b".repeat(63)}.${"c".repeat(63)}.${"d".repeat(61)}`;
    assert.equal(name.length, 253);
    const created = await ok(kube(cluster.kubeConfig, "POST", crontabPath(ns), crontab(name)), "create long name");
    await reader.until(
      () =>
        reader
          .byName(ns)
          .get(name)
          ?.some((e) => e.resourceVersion === rvOf(created)) === true,
      20_000,
    );
    const got = reader.all.find((r) => r.event.name === name);
    assert.ok(got !== undefined);
    assert.ok(got.groupId.length <= 128, `group id ${got.groupId.length} chars`);
    assert.ok(got.dedupId.length <= 128, `dedup id ${got.dedupId.length} chars`);
    assert.equal(got.event.kind, "CronTab");
    assert.equal(got.event.uid, created.body.metadata?.uid);
  });

  it("a change to an owned CronJob announces its CronTab; the CronJob's own objects are never announced", { timeout: 30_000 }, async () => {
    const ns = cluster.ns("children");
    const parent = await ok(kube(cluster.kubeConfig, "POST", crontabPath(ns), crontab("parent")), "create parent");
    const parentRv = rvOf(parent);
    await reader.until(() => reader.byName(ns).get("parent")?.length === 1, 20_000);
    const cronJob = {
      apiVersion: "batch/v1",
      kind: "CronJob",
      metadata: {
        name: "parent-job",
        // The label the functions put on every child: the bridge watches only children that carry it.
        labels: { "crdfn.io/parent-uid": parent.body.metadata?.uid },
        ownerReferences: [{ apiVersion: "stable.example.com/v1", kind: "CronTab", name: "parent", uid: parent.body.metadata?.uid, controller: true }],
      },
      // Suspended: a firing (every 5 minutes) makes the CronJob controller write its status, an
      // announcement of its own that would shift the counts below.
      spec: {
        schedule: "*/5 * * * *",
        suspend: true,
        jobTemplate: { spec: { template: { spec: { restartPolicy: "Never", containers: [{ name: "c", image: "busybox" }] } } } },
      },
    };
    await ok(kube(cluster.kubeConfig, "POST", `/apis/batch/v1/namespaces/${ns}/cronjobs`, cronJob), "create cronjob");
    await reader.until(() => (reader.byName(ns).get("parent")?.length ?? 0) >= 2, 20_000);
    const childEvent = reader.byName(ns).get("parent")?.[1];
    assert.equal(childEvent?.reason, "child");
    assert.equal(childEvent?.resourceVersion, parentRv, "announces the parent at its own version");
    await ok(kube(cluster.kubeConfig, "DELETE", `/apis/batch/v1/namespaces/${ns}/cronjobs/parent-job`), "delete cronjob");
    await reader.until(() => (reader.byName(ns).get("parent")?.length ?? 0) >= 3, 20_000);
    assert.ok(reader.all.every((r) => r.event.kind === "CronTab"));
    // A CronJob without the label is not watched at all, whoever it names as its controller: the
    // bridge never observes it. A labelled one created after it is the fence: the same watch
    // delivers in order, so once the fence is announced the unlabelled one would have been
    // observed before it.
    const observed = () => metricValue(bridge.registry, "crdfn_bridge_events_observed_total", { resource: "cronjobs.batch" });
    const observedBefore = await observed();
    await ok(
      kube(cluster.kubeConfig, "POST", `/apis/batch/v1/namespaces/${ns}/cronjobs`, {
        ...cronJob,
        metadata: { ...cronJob.metadata, name: "unlabelled", labels: {} },
      }),
      "create an unlabelled cronjob",
    );
    await ok(
      kube(cluster.kubeConfig, "POST", `/apis/batch/v1/namespaces/${ns}/cronjobs`, {
        ...cronJob,
        metadata: { ...cronJob.metadata, name: "fence-job" },
      }),
      "create a labelled cronjob after it",
    );
    await reader.until(() => (reader.byName(ns).get("parent")?.length ?? 0) >= 4, 20_000);
    assert.equal((await observed()) - observedBefore, 1, "an unlabelled child is not watched: only the labelled one after it was observed");
  });

  describe("the function's own new child, written as the function writes it (apply as crdfn, then a status write recording it)", () => {
    const merge = "application/merge-patch+json";
    const jobsPath = (ns: string, name = "") => `/apis/batch/v1/namespaces/${ns}/cronjobs${name ? `/${name}` : ""}`;
    const observed = (resource: string) => metricValue(bridge.registry, "crdfn_bridge_events_observed_total", { resource });
    const events = (ns: string, name: string) => reader.byName(ns).get(name) ?? [];
    const said = (ns: string, name: string) => events(ns, name).map((e) => `${e.type} ${e.reason}`);
    /** A parent created and announced once; its uid. */
    const announcedParent = async (ns: string, name: string): Promise<string> => {
      const created = await ok(kube(cluster.kubeConfig, "POST", crontabPath(ns), crontab(name)), `create ${name}`);
      await reader.until(() => events(ns, name).length === 1, 20_000);
      return (created.body.metadata as { uid: string }).uid;
    };
    /** The function's apply of a suspended CronJob controlled by `parent`: the API server's answer. */
    const applyJob = async (ns: string, parent: string, uid: string, name: string, manager = "crdfn") =>
      (
        await ok(
          kube(
            cluster.kubeConfig,
            "PATCH",
            `${jobsPath(ns, name)}?fieldManager=${manager}&force=true`,
            {
              apiVersion: "batch/v1",
              kind: "CronJob",
              metadata: {
                name,
                labels: { "crdfn.io/parent-uid": uid },
                annotations: { "crdfn.io/applied-hash": `h-${name}` },
                ownerReferences: [{ apiVersion: "stable.example.com/v1", kind: "CronTab", name: parent, uid, controller: true, blockOwnerDeletion: true }],
              },
              spec: {
                schedule: "*/5 * * * *",
                suspend: true,
                jobTemplate: { spec: { template: { spec: { restartPolicy: "Never", containers: [{ name: "c", image: "busybox" }] } } } },
              },
            },
            "application/apply-patch+yaml",
          ),
          `apply ${name}`,
        )
      ).body as never;
    /** The function's status write after its reconcile left `left`: the record of those children. */
    const recordStatus = async (ns: string, name: string, left: unknown[]) => {
      const current = (await ok(kube(cluster.kubeConfig, "GET", crontabPath(ns, name)), `get ${name}`)).body as never;
      const reconciled = reconciledRecord(
        current,
        left.map((c) => childMarkOf(c as never, "crdfn")),
      );
      await ok(
        kube(cluster.kubeConfig, "PATCH", `${crontabPath(ns, name)}/status?fieldManager=crdfn`, { status: { observedGeneration: 1, reconciled } }, merge),
        `status ${name}`,
      );
    };

    it(
      "is not announced back once the status write records it; its key is in the parent's next event; anyone else's changes are",
      { timeout: 60_000 },
      async () => {
        const ns = cluster.ns("held");
        const uid = await announcedParent(ns, "own");
        const [jobs, crontabs] = [await observed("cronjobs.batch"), await observed("crontabs.stable.example.com")];
        const child = await applyJob(ns, "own", uid, "own-job");
        await recordStatus(ns, "own", [child]);
        // Both writes seen by the bridge (its two watches, in either order), then a change of the
        // parent's own: had the child's announcement been sent or still be held, it would be in
        // the queue before this one or merged into it (as reason "child").
        await eventually(async () => {
          assert.ok((await observed("cronjobs.batch")) > jobs && (await observed("crontabs.stable.example.com")) > crontabs);
        });
        await ok(kube(cluster.kubeConfig, "PATCH", crontabPath(ns, "own"), { metadata: { labels: { tier: "gold" } } }, merge), "label own");
        await reader.until(() => events(ns, "own").length >= 2, 20_000);
        await reader.until(() => bridge.pendingCount() === 0, 20_000);
        assert.deepEqual(said(ns, "own"), ["ADDED watch", "MODIFIED watch"], "one announcement for the new object, one for its own change");
        assert.deepEqual(
          events(ns, "own")[1]?.children?.map((c) => c.name),
          ["own-job"],
          "the next event carries the child's key (a later reconcile that no longer wants it prunes it)",
        );

        // Someone else creates a child, edits the function's, deletes it: each is news.
        await applyJob(ns, "own", uid, "stray-job", "someone");
        await reader.until(() => events(ns, "own").length >= 3, 20_000);
        await ok(kube(cluster.kubeConfig, "PATCH", `${jobsPath(ns, "own-job")}?fieldManager=kubectl-edit`, { spec: { schedule: "1 * * * *" } }, merge), "edit");
        await reader.until(() => events(ns, "own").length >= 4, 20_000);
        await ok(kube(cluster.kubeConfig, "DELETE", jobsPath(ns, "own-job")), "delete own-job");
        await reader.until(() => events(ns, "own").length >= 5, 20_000);
        assert.deepEqual(said(ns, "own").slice(2), ["MODIFIED child", "MODIFIED child", "MODIFIED child"]);
      },
    );

    it("is announced when no status write records it (the function's status write failed), once the hold ends", { timeout: 60_000 }, async () => {
      const ns = cluster.ns("held");
      const uid = await announcedParent(ns, "unrecorded");
      await applyJob(ns, "unrecorded", uid, "unrecorded-job");
      await reader.until(() => events(ns, "unrecorded").length >= 2, 30_000);
      assert.deepEqual(said(ns, "unrecorded"), ["ADDED watch", "MODIFIED child"]);
      assert.deepEqual(
        events(ns, "unrecorded")[1]?.children?.map((c) => c.name),
        ["unrecorded-job"],
      );
    });
  });

  it("resync re-announces every object as RESYNC on its period, past FIFO deduplication", { timeout: 30_000 }, async () => {
    const ns = cluster.ns("resync");
    const names = ["r-0", "r-1", "r-2"];
    for (const name of names) await ok(kube(cluster.kubeConfig, "POST", crontabPath(ns), crontab(name)), name);
    const resyncing = startBridge(bridgeConfig(cluster, { CRDFN_NAMESPACES: ns, CRDFN_RESYNC_SECONDS: "1" }), {
      eventKey: TEST_EVENT_KEY,
      kubeConfig: cluster.kubeConfig,
      sqs,
      logger: testLogger(),
    });
    try {
      const resynced = (name: string) => (reader.byName(ns).get(name) ?? []).filter((e) => e.type === "RESYNC" && e.reason === "resync").length;
      await reader.until(
        () => names.every((n) => resynced(n) >= 2),
        20_000,
        () => names.map((n) => `${n}: ${resynced(n)}`).join(", "),
      );
    } finally {
      await resyncing.stop(1000);
    }
  });
});
