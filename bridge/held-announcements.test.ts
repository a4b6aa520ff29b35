// What the function's own child writes announce, through the real publisher on a fake clock: a new
// child's announcement is held for the parent's status write and dropped when that write records
// the children as the index knows them (no second reconcile of a new object), in either order of
// the two watches; it is sent when nothing records it, and whatever else changes a child stays news.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { pino } from "pino";
import { Registry } from "prom-client";
import type { KeyEvent } from "../core/event.ts";
import { childMarkOf, reconciledRecord } from "../core/reconciled.ts";
import { ChildTracker, GONE_CHILD_HOLD_MS, OWN_CHILD_HOLD_MS } from "./child-tracker.ts";
import { createBridgeMetrics } from "./metrics.ts";
import { ParentTracker } from "./parent-tracker.ts";
import { Publisher } from "./publisher.ts";
import type { TrackerOptions } from "./tracker.ts";
import type { QueueTransport } from "./transport.ts";
import type { WatchedObject } from "./watched-object.ts";
import { TEST_EVENT_KEY } from "../test/support/event-key.ts";
import { fakeClock } from "../test/support/fake-clock.ts";

const crontabs = { group: "stable.example.com", version: "v1", plural: "crontabs", kind: "CronTab", namespaced: true };
const cronjobs = { group: "batch", version: "v1", plural: "cronjobs", kind: "CronJob", namespaced: true };
const WRITTEN = "2026-11-21T00:00:00Z";

/** The trackers feeding a publisher whose queue accepts at once; `sent` is what reached the queue, in order. */
function pipeline() {
  const clock = fakeClock();
  const sent: KeyEvent[] = [];
  const transport: QueueTransport = {
    noun: "queue",
    maxBatch: 10,
    lingerMs: 0,
    send(_destination, messages) {
      for (const m of messages) sent.push(JSON.parse(m.body) as KeyEvent);
      return Promise.resolve(messages.map(() => ({ ok: true as const })));
    },
    exists: () => Promise.resolve(true),
    close: () => Promise.resolve(),
  };
  const registry = new Registry();
  const publisher = new Publisher({
    transport,
    destinationOf: () => "q.fifo",
    maxPending: 100,
    concurrency: 4,
    logger: pino({ level: "silent" }),
    metrics: createBridgeMetrics(registry),
    now: () => clock.nowMs(),
    timers: clock.timers,
    eventKey: TEST_EVENT_KEY,
  });
  const options: TrackerOptions = {
    cluster: "c",
    skipStatusOnly: true,
    now: clock.now,
    timers: clock.timers,
    announce: (key, event, cause, opts) => publisher.offer(key, event, cause, opts),
    functionFieldManager: "crdfn",
  };
  const parents = new ParentTracker(crontabs, options);
  const children = new ChildTracker(cronjobs, true, options);
  parents.owns(children);
  void parents.releaseInitialWork();
  /** Lets the publisher's sends (promises) run, then says what reached the queue as `name type reason`. */
  const queued = async (): Promise<string[]> => {
    await new Promise((r) => setImmediate(r));
    return sent.map((e) => `${e.name} ${e.type} ${e.reason}`);
  };
  return { clock, sent, publisher, parents, children, queued };
}

const parent = (rv: string, status: unknown = {}): WatchedObject => ({
  metadata: { name: "p", namespace: "ns", uid: "uid-p", resourceVersion: rv, generation: 1 },
  spec: { replicas: 1 },
  status,
});

/** A CronJob of p's: applied by the function (its applied hash, its manager's Apply), or last written by someone else. */
const job = (name: string, rv: string, writer = "crdfn", schedule = "* * * * *"): WatchedObject => ({
  metadata: {
    name,
    namespace: "ns",
    uid: `uid-${name}`,
    resourceVersion: rv,
    ownerReferences: [{ apiVersion: "stable.example.com/v1", kind: "CronTab", name: "p", uid: "uid-p", controller: true }],
    annotations: { "crdfn.io/applied-hash": `h-${name}-${schedule}` },
    managedFields: [{ manager: writer, operation: writer === "crdfn" ? "Apply" : "Update", time: WRITTEN }],
  },
  spec: { schedule },
  status: {},
});

/** p's status as its function writes it after leaving `left`: the record of those children, and what is due. */
const recorded = (rv: string, left: WatchedObject[], extra: Record<string, unknown> = {}): WatchedObject => {
  const p = parent(rv);
  return parent(rv, {
    observedGeneration: 1,
    reconciled: reconciledRecord(
      p,
      left.map((c) => childMarkOf(c, "crdfn")),
    ),
    ...extra,
  });
};

describe("the function's own new child", () => {
  it("is held and then dropped when the parent's status write records it: one reconcile, in either order of the two watches", async () => {
    for (const order of ["child first", "status first"] as const) {
      const { clock, publisher, parents, children, queued } = pipeline();
      await parents.upsert(parent("1"), "watch");
      assert.deepEqual(await queued(), ["p ADDED watch"]);
      const child = job("p-job", "2");
      if (order === "child first") {
        await children.upsert(child, "watch");
        await parents.upsert(recorded("3", [child]), "watch");
      } else {
        await parents.upsert(recorded("3", [child]), "watch");
        await children.upsert(child, "watch");
      }
      clock.advance(2 * OWN_CHILD_HOLD_MS);
      assert.deepEqual(await queued(), ["p ADDED watch"], `${order}: no second reconcile`);
      assert.equal(publisher.pendingCount, 0, `${order}: nothing held any longer`);
    }
  });

  it("still reaches the function: the parent's next event carries its key from the index (so a later reconcile can prune it)", async () => {
    const { sent, parents, children, queued } = pipeline();
    await parents.upsert(parent("1"), "watch");
    const child = job("p-job", "2");
    await children.upsert(child, "watch");
    await parents.upsert(recorded("3", [child]), "watch");
    await parents.upsert({ ...recorded("4", [child]), spec: { replicas: 2 }, metadata: { ...parent("4").metadata, generation: 2 } }, "watch");
    assert.deepEqual(await queued(), ["p ADDED watch", "p MODIFIED watch"]);
    assert.deepEqual(
      sent.at(-1)?.children?.map((c) => [c.name, c.uid, c.appliedHash]),
      [["p-job", "uid-p-job", "h-p-job-* * * * *"]],
    );
  });

  it("is sent when the hold ends if no status write records it (the write failed), and at once on a status write that does not", async () => {
    const { clock, parents, children, queued } = pipeline();
    await parents.upsert(parent("1"), "watch");
    await children.upsert(job("p-job", "2"), "watch");
    clock.advance(OWN_CHILD_HOLD_MS - 1);
    assert.deepEqual(await queued(), ["p ADDED watch"], "held");
    clock.advance(1);
    assert.deepEqual(await queued(), ["p ADDED watch", "p MODIFIED child"], "nothing recorded it: sent when the hold ends");

    const failed = pipeline();
    await failed.parents.upsert(parent("1"), "watch");
    await failed.children.upsert(job("p-job", "2"), "watch");
    // The reconcile failed after its apply: its status records the failure, not the child.
    await failed.parents.upsert(parent("3", { observedGeneration: 1, conditions: [{ type: "Ready", status: "False" }] }), "watch");
    assert.deepEqual(await failed.queued(), ["p ADDED watch", "p MODIFIED child"], "the status write ends the hold");
  });

  it("a child created by anyone else, edited or deleted later is news, though the status recorded the children before", async () => {
    const { clock, parents, children, queued } = pipeline();
    await parents.upsert(parent("1"), "watch");
    const own = job("p-job", "2");
    await children.upsert(own, "watch");
    await parents.upsert(recorded("3", [own]), "watch");
    assert.deepEqual(await queued(), ["p ADDED watch"]);
    await children.upsert(job("stray", "4", "someone"), "watch");
    assert.deepEqual((await queued()).slice(1), ["p MODIFIED child"], "created by someone else: at once");
    await children.upsert(job("p-job", "5", "kubectl-edit", "1 * * * *"), "watch");
    assert.deepEqual((await queued()).slice(1), ["p MODIFIED child", "p MODIFIED child"], "edited by someone else: at once");
    await children.remove(job("p-job", "6", "kubectl-edit", "1 * * * *"));
    clock.advance(GONE_CHILD_HOLD_MS);
    assert.deepEqual((await queued()).slice(1), ["p MODIFIED child", "p MODIFIED child", "p MODIFIED child"], "deleted: after the hold");
  });

  it("a child deleted while a reconcile that applied it runs: announced once that reconcile's status records it", async () => {
    const { clock, sent, parents, children, queued } = pipeline();
    await parents.upsert(parent("1"), "watch");
    const a = job("a", "2");
    await children.upsert(a, "watch");
    await parents.upsert(recorded("3", [a]), "watch");
    // A second reconcile applies b; someone deletes it before that reconcile's status write.
    const b = job("b", "4");
    await children.upsert(b, "watch");
    await children.remove(b);
    assert.deepEqual(await queued(), ["p ADDED watch"], "the children are again those recorded: nothing yet");
    await parents.upsert(recorded("5", [a, b]), "watch");
    clock.advance(OWN_CHILD_HOLD_MS);
    assert.deepEqual(await queued(), ["p ADDED watch", "p MODIFIED child"], "its status records b, which is gone: news");
    assert.deepEqual(
      sent.at(-1)?.children?.map((c) => c.name),
      ["a"],
    );
  });

  it("the function's prune, seen after its status write: not news; what the status has due still comes", async () => {
    const { clock, parents, children, queued } = pipeline();
    await parents.upsert(parent("1"), "watch");
    const [a, b] = [job("a", "2"), job("b", "3")];
    await children.upsert(a, "watch");
    await children.upsert(b, "watch");
    await parents.upsert(recorded("4", [a, b]), "watch");
    assert.deepEqual(await queued(), ["p ADDED watch"]);
    // The next reconcile keeps a, records that, asks to be requeued, then prunes b.
    const at = new Date(clock.nowMs() + 3 * OWN_CHILD_HOLD_MS).toISOString();
    await parents.upsert(recorded("5", [a], { nextReconcile: { at, reason: "Requeue" } }), "watch");
    await children.remove(b);
    clock.advance(2 * OWN_CHILD_HOLD_MS);
    assert.deepEqual(await queued(), ["p ADDED watch"], "the prune is what the status records");
    clock.advance(OWN_CHILD_HOLD_MS);
    assert.deepEqual(await queued(), ["p ADDED watch", "p RESYNC requeue"], "the requeue is not lost with the withdrawn announcement");
    parents.stop();
  });

  it("a prune of hundreds, slower than the hold: no announcement while it is under way, and none at its end; a kept child deleted meanwhile is news at the end", async () => {
    for (const meanwhile of [false, true]) {
      const { clock, parents, children, queued } = pipeline();
      await parents.upsert(parent("1"), "watch");
      const jobs = Array.from({ length: 400 }, (_, i) => job(`j${i}`, String(10 + i)));
      for (const j of jobs) await children.upsert(j, "watch");
      await parents.upsert(recorded("5000", jobs), "watch");
      const [kept, pruned] = [jobs.slice(0, 200), jobs.slice(200)];
      await parents.upsert(recorded("5001", kept), "watch");
      for (const [i, j] of pruned.entries()) {
        if (meanwhile && i === 100) await children.remove(kept[0]!);
        await children.remove(j);
        // The function's deletes, a few a second on a loaded API server: every hold runs out between two.
        if (i % 10 === 0) clock.advance(2 * GONE_CHILD_HOLD_MS);
      }
      clock.advance(2 * GONE_CHILD_HOLD_MS);
      assert.deepEqual(
        await queued(),
        meanwhile ? ["p ADDED watch", "p MODIFIED child"] : ["p ADDED watch"],
        `deleted by someone else meanwhile: ${meanwhile}`,
      );
      parents.stop();
    }
  });
});
