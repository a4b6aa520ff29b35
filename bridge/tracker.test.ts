import { describe, it } from "node:test";
import assert from "node:assert/strict";
import type { KeyEvent } from "../core/event.ts";
import type { WatchedObject } from "./watched-object.ts";
import { childMarkOf, reconciledRecord } from "../core/reconciled.ts";
import { ChildTracker, OWN_CHILD_HOLD_MS } from "./child-tracker.ts";
import { KeptBodies } from "./kept-bodies.ts";
import { ParentTracker } from "./parent-tracker.ts";
import type { AnnounceOptions } from "./sink.ts";
import type { TrackerOptions } from "./tracker.ts";
import { fakeClock, type FakeClock } from "../test/support/fake-clock.ts";

const crontabs = { group: "stable.example.com", version: "v1", plural: "crontabs", kind: "CronTab", namespaced: true };
const cronjobs = { group: "batch", version: "v1", plural: "cronjobs", kind: "CronJob", namespaced: true };

function setup(skipStatusOnly = true, settings: { clock?: FakeClock; functionFieldManager?: string; initial?: boolean; initialBodies?: KeptBodies } = {}) {
  const clock = settings.clock ?? fakeClock();
  const out: Array<{ key: string; event: KeyEvent; cause: string; options: AnnounceOptions | undefined }> = [];
  const options: TrackerOptions = {
    cluster: "c",
    skipStatusOnly,
    now: clock.now,
    timers: clock.timers,
    announce: (key, event, cause, opts) => Promise.resolve(void out.push({ key, event, cause, options: opts })),
    ...(settings.functionFieldManager ? { functionFieldManager: settings.functionFieldManager } : {}),
  };
  const parents = new ParentTracker(crontabs, options, {
    bodies: true,
    maxBodyBytes: 64 * 1024,
    ...(settings.initialBodies === undefined ? {} : { initialBodies: settings.initialBodies }),
  });
  const children = new ChildTracker(cronjobs, true, options);
  parents.owns(children);
  // Past a new bridge's first list, unless the test is about it.
  if (!settings.initial) void parents.releaseInitialWork();
  return { out, parents, children, announced: () => out.filter((x) => !x.options?.onlyIfPending) };
}

const ct = (name: string, rv: string, spec: unknown = { replicas: 1 }, status: unknown = {}): WatchedObject => ({
  metadata: { name, namespace: "ns", uid: `uid-${name}`, resourceVersion: rv, generation: 1 },
  spec,
  status,
});
const cj = (name: string, rv: string, owner: string | undefined, status: unknown = {}): WatchedObject => ({
  metadata: {
    name,
    namespace: "ns",
    uid: `uid-${name}`,
    resourceVersion: rv,
    ...(owner === undefined
      ? {}
      : { ownerReferences: [{ apiVersion: "stable.example.com/v1", kind: "CronTab", name: owner, uid: `uid-${owner}`, controller: true }] }),
  },
  spec: { schedule: "* * * * *" },
  status,
});
describe("what an object's change announces", () => {
  it("announce new and changed objects, skip status-only changes", async () => {
    const { announced, parents } = setup();
    const out = announced;
    await parents.upsert(ct("a", "1"), "list", 1);
    await parents.upsert(ct("a", "2", { replicas: 1 }, { ready: true }), "watch");
    await parents.upsert(ct("a", "3", { replicas: 2 }), "watch");
    assert.deepEqual(
      out().map((o) => [o.event.type, o.event.resourceVersion, o.event.reason]),
      [
        ["ADDED", "1", "list"],
        ["MODIFIED", "3", "watch"],
      ],
    );
    assert.equal(out()[0]?.key, "stable.example.com/crontabs/ns/a");
  });

  it("announce every resourceVersion when the filter is off", async () => {
    const { out, parents } = setup(false);
    await parents.upsert(ct("a", "1"), "list", 1);
    await parents.upsert(ct("a", "2", { replicas: 1 }, { ready: true }), "watch");
    assert.equal(out.length, 2);
  });

  it("a relist sweeps vanished objects into DELETED events that are not deduplicated away", async () => {
    const { announced, parents } = setup();
    const first = parents.beginList();
    await parents.upsert(ct("a", "1"), "list", first);
    await parents.upsert(ct("b", "2"), "list", first);
    const second = parents.beginList();
    await parents.upsert(ct("a", "1"), "relist", second);
    await parents.sweep(undefined, second);
    const out = announced();
    const last = out.at(-1);
    assert.equal(out.length, 3, "the unchanged object is not announced again");
    assert.equal(last?.event.type, "DELETED");
    assert.equal(last?.event.name, "b");
    assert.equal(last?.cause, "deleted");
  });

  it("carries the object (without managedFields) and its children's keys, a hash only after the function's own apply", async () => {
    const { out, parents, children } = setup(true, { functionFieldManager: "crdfn" });
    await parents.upsert(ct("p", "5"), "list", 1);
    const applied = {
      ...cj("job", "6", "p"),
      metadata: {
        ...cj("job", "6", "p").metadata,
        labels: { "crdfn.io/parent-uid": "uid-p" },
        annotations: { "crdfn.io/applied-hash": "h1" },
        managedFields: [{ manager: "crdfn", operation: "Apply", time: "2026-11-21T00:00:00Z" }],
      },
    };
    await children.upsert(applied, "watch");
    const withManagedFields = {
      ...ct("p", "7", { replicas: 2 }),
      metadata: { ...ct("p", "7").metadata, managedFields: [{ manager: "kubectl", operation: "Update", time: "2026-11-21T00:00:00Z" }] },
    };
    await parents.upsert(withManagedFields, "watch");
    const last = out.at(-1)!.event;
    assert.equal(last.v, 2);
    assert.deepEqual((last.object as { spec?: unknown }).spec, { replicas: 2 });
    assert.equal((last.object?.metadata as Record<string, unknown>).managedFields, undefined);
    assert.deepEqual(last.children, [
      { apiVersion: "batch/v1", kind: "CronJob", namespace: "ns", name: "job", uid: "uid-job", resourceVersion: "6", appliedHash: "h1" },
    ]);
    const tampered = {
      ...applied,
      metadata: {
        ...applied.metadata,
        resourceVersion: "8",
        managedFields: [...applied.metadata.managedFields, { manager: "kubectl-edit", operation: "Update", time: "2026-11-21T00:00:09Z" }],
      },
      spec: { schedule: "1 * * * *" },
    };
    await children.upsert(tampered, "watch");
    assert.equal(out.at(-1)?.event.children?.[0]?.appliedHash, undefined, "someone else wrote it since: no hash, so the function applies again");
  });

  it("the function adding its own finalizer is not news; anyone else's finalizer change is", async () => {
    const { announced, parents } = setup(true, { functionFieldManager: "crdfn" });
    const withFinalizers = (rv: string, finalizers: string[], manager: string) => {
      const o = ct("p", rv);
      const owned = Object.fromEntries(finalizers.map((f) => [`v:${JSON.stringify(f)}`, {}]));
      return {
        ...o,
        metadata: {
          ...o.metadata,
          finalizers,
          managedFields: [
            { manager, operation: "Update", time: "2026-11-21T00:00:00Z", fieldsV1: { "f:metadata": { "f:finalizers": { ".": {}, ...owned } } } },
          ],
        },
      };
    };
    await parents.upsert(ct("p", "5"), "list", 1);
    const before = announced().length;
    await parents.upsert(withFinalizers("6", ["stable.example.com/cleanup"], "crdfn"), "watch");
    assert.equal(announced().length, before, "its own finalizer: the reconcile that added it goes on");
    await parents.upsert(withFinalizers("7", ["stable.example.com/cleanup", "other.io/hold"], "someone-else"), "watch");
    assert.equal(announced().length, before + 1, "a finalizer someone else added");
    await parents.upsert(withFinalizers("8", ["other.io/hold"], "someone-else"), "watch");
    assert.equal(announced().length, before + 2, "a finalizer removed");
  });

  it("a status write brings a waiting announcement's body up to date", async () => {
    const { out, parents } = setup(true, { functionFieldManager: "crdfn" });
    await parents.upsert(ct("p", "5"), "list", 1);
    await parents.upsert(ct("p", "6", { replicas: 1 }, { observedGeneration: 1 }), "watch");
    assert.deepEqual(out.at(-1)?.options, { onlyIfPending: true });
    assert.equal(out.at(-1)?.event.resourceVersion, "6");
  });
});

describe("a child's change announces its controller owner", () => {
  it("a child announces its controller owner, with its own version as the cause; unowned children are not kept", async () => {
    const { out, parents, children } = setup();
    await parents.upsert(ct("p", "5"), "list", 1);
    await children.upsert(cj("stray", "6", undefined), "watch");
    assert.equal(children.size, 0);
    await children.upsert(cj("job", "7", "p"), "watch");
    await children.upsert(cj("job", "8", "p", { lastScheduleTime: "now" }), "watch");
    await children.remove(cj("job", "9", "p"));
    const childEvents = out.slice(1);
    assert.deepEqual(
      childEvents.map((o) => [o.event.name, o.event.resourceVersion, o.event.reason, o.cause]),
      [
        ["p", "5", "child", "child:uid-job:7"],
        ["p", "5", "child", "child:uid-job:8"],
        ["p", "5", "child", "child-gone:uid-job"],
      ],
    );
  });

  it("a parent's children as its events carry them, as they come and go: one, two, one, none", async () => {
    const { out, parents, children } = setup();
    await parents.upsert(ct("p", "5"), "list", 1);
    const carried = () => (out.at(-1)?.event.children ?? []).map((c) => c.name).sort();
    await children.upsert(cj("one", "6", "p"), "watch");
    assert.deepEqual(carried(), ["one"]);
    await children.upsert(cj("two", "7", "p"), "watch");
    assert.deepEqual(carried(), ["one", "two"]);
    await children.remove(cj("one", "8", "p"));
    assert.deepEqual(carried(), ["two"]);
    // Adopted away: the former owner's event no longer carries it.
    await children.upsert(cj("two", "9", undefined), "watch");
    assert.deepEqual(carried(), []);
    await children.upsert(cj("two", "10", "p"), "watch");
    await children.upsert(cj("two", "11", "p", { lastScheduleTime: "now" }), "watch");
    assert.deepEqual(carried(), ["two"], "a child's own change leaves it indexed once");
  });

  it("an orphaned child announces its former owner; a child of an unknown parent announces nothing", async () => {
    const { out, parents, children } = setup();
    await parents.upsert(ct("p", "5"), "list", 1);
    await children.upsert(cj("job", "7", "p"), "watch");
    await children.upsert(cj("job", "8", undefined), "watch");
    await children.upsert(cj("other", "9", "unknown"), "watch");
    assert.deepEqual(
      out.slice(1).map((o) => o.cause),
      ["child:uid-job:7", "child:uid-job:8"],
    );
  });

  it("the function's own new child announces its parent after a hold; its own change of a child announces nothing", async () => {
    const { out, parents, children } = setup(true, { functionFieldManager: "crdfn" });
    await parents.upsert(ct("p", "5"), "list", 1);
    const own = (rv: string, schedule: string) => ({
      ...cj("job", rv, "p"),
      spec: { schedule },
      metadata: { ...cj("job", rv, "p").metadata, managedFields: [{ manager: "crdfn", operation: "Apply", time: "2026-11-21T00:00:00Z" }] },
    });
    await children.upsert(own("6", "* * * * *"), "watch");
    assert.deepEqual(out.at(-1)?.options, { holdMs: OWN_CHILD_HOLD_MS });
    const before = out.length;
    await children.upsert(own("7", "1 * * * *"), "watch");
    assert.equal(out.length, before, "its own change is the answer to the last event");
  });

  it("a child's status written by its controller announces the parent, though its content is the function's own apply", async () => {
    const { announced, parents, children } = setup(true, { functionFieldManager: "crdfn" });
    await parents.upsert(ct("p", "5"), "list", 1);
    const child = (rv: string, status: unknown) => ({
      ...cj("job", rv, "p", status),
      metadata: { ...cj("job", rv, "p").metadata, managedFields: [{ manager: "crdfn", operation: "Apply", time: "2026-11-21T00:00:00Z" }] },
    });
    await children.upsert(child("6", {}), "watch");
    const before = announced().length;
    await children.upsert(child("7", { active: [{ name: "run-1" }] }), "watch");
    assert.equal(announced().length, before + 1, "its controller wrote its status");
  });

  it("a cluster-scoped parent hears from its namespaced children", async () => {
    const out: KeyEvent[] = [];
    const options: TrackerOptions = {
      cluster: "c",
      skipStatusOnly: true,
      now: () => new Date(),
      timers: fakeClock().timers,
      announce: (_k, e) => Promise.resolve(void out.push(e)),
    };
    const parents = new ParentTracker({ group: "stable.example.com", version: "v1", plural: "crontabs", kind: "CronTab", namespaced: false }, options);
    const children = new ChildTracker(cronjobs, true, options);
    parents.owns(children);
    await parents.releaseInitialWork();
    await parents.upsert({ metadata: { name: "p", uid: "uid-p", resourceVersion: "1", generation: 1 }, spec: {} }, "list", 1);
    await children.upsert(cj("job", "2", "p"), "watch");
    await children.remove(cj("job", "3", "p"));
    assert.deepEqual(
      out.map((e) => [e.name, e.namespace, e.reason]),
      [
        ["p", undefined, "list"],
        ["p", undefined, "child"],
        ["p", undefined, "child"],
      ],
    );
  });

  it("a parent with more children than an event can carry is announced without their keys", async () => {
    const { announced, parents, children } = setup();
    await parents.upsert(ct("big", "1"), "list", 1);
    for (let i = 0; i < 2500; i++) await children.upsert(cj(`job-${i}`, String(10 + i), "big"), "watch");
    const last = announced().at(-1)!;
    assert.equal(last.event.name, "big");
    assert.equal(last.event.children, undefined, "unknown: the function lists them");
    parents.stop();
  });
});

describe("a new bridge's first list announces what needs work", () => {
  it("a new bridge announces only what needs work, once the children are listed, with their keys", async () => {
    const { out, parents, children } = setup(true, { initial: true, functionFieldManager: "crdfn" });
    const settled = (name: string) => ct(name, "1", { replicas: 1 }, { observedGeneration: 1 });
    await parents.upsert(settled("done"), "list", 1);
    await parents.upsert(ct("fresh", "2"), "list", 1);
    await parents.upsert({ ...settled("leaving"), metadata: { ...settled("leaving").metadata, deletionTimestamp: "2026-11-21T00:00:00Z" } }, "list", 1);
    await children.upsert(cj("fresh-job", "3", "fresh"), "list", 1);
    assert.equal(out.length, 0, "nothing before the children are listed");
    await parents.releaseInitialWork();
    assert.deepEqual(out.map((o) => o.event.name).sort(), ["fresh", "leaving"]);
    assert.deepEqual(
      out.find((o) => o.event.name === "fresh")?.event.children?.map((c) => [c.kind, c.name, c.uid]),
      [["CronJob", "fresh-job", "uid-fresh-job"]],
    );
  });

  it("a new bridge's first announcements carry the listed bodies within their budget, never a body older than the event", async () => {
    const one = JSON.stringify(ct("a", "1")).length;
    // Room for two bodies: the third object needing work goes by its keys.
    const { announced, parents } = setup(true, { initial: true, functionFieldManager: "crdfn", initialBodies: new KeptBodies(2 * one + 10) });
    await parents.upsert(ct("a", "1"), "list", 1);
    await parents.upsert(ct("b", "2"), "list", 1);
    await parents.upsert(ct("c", "3"), "list", 1);
    // Changed while the children were listed: announced at once, with the newer body.
    await parents.upsert(ct("b", "4", { replicas: 2 }), "watch", 1);
    // Its status only: still initial work, but the kept body is now older than the object.
    await parents.upsert(ct("a", "5", { replicas: 1 }, { phase: "x" }), "watch", 1);
    await parents.releaseInitialWork();
    const rvOfBody = (e: KeyEvent) => (e.object?.metadata as { resourceVersion?: string } | undefined)?.resourceVersion ?? null;
    assert.deepEqual(Object.fromEntries(announced().map((o) => [o.event.name, rvOfBody(o.event)])), { a: null, b: "4", c: null });
    assert.equal(announced().find((o) => o.event.name === "a")?.event.resourceVersion, "5");
    // With b announced before, its room is free again: a budget of one body carries the first listed.
    const roomy = setup(true, { initial: true, functionFieldManager: "crdfn", initialBodies: new KeptBodies(one) });
    await roomy.parents.upsert(ct("a", "1"), "list", 1);
    await roomy.parents.upsert(ct("c", "3"), "list", 1);
    await roomy.parents.releaseInitialWork();
    assert.deepEqual(
      roomy.out.map((o) => [o.event.name, o.event.object === undefined]),
      [
        ["a", false],
        ["c", true],
      ],
    );
    // Without a budget, keys only.
    const none = setup(true, { initial: true, functionFieldManager: "crdfn" });
    await none.parents.upsert(ct("a", "1"), "list", 1);
    await none.parents.releaseInitialWork();
    assert.equal(none.out[0]?.event.object, undefined);
  });

  it("the bridge's resources keep listed bodies in one store, and free it as they announce", async () => {
    const one = JSON.stringify(ct("a", "1")).length;
    const store = new KeptBodies(2 * one + 10);
    const first = setup(true, { initial: true, functionFieldManager: "crdfn", initialBodies: store });
    const second = setup(true, { initial: true, functionFieldManager: "crdfn", initialBodies: store });
    await first.parents.upsert(ct("a", "1"), "list", 1);
    await second.parents.upsert(ct("b", "2"), "list", 1);
    // The store is full: the third, listed by either resource, goes by its keys.
    await second.parents.upsert(ct("c", "3"), "list", 1);
    await first.parents.releaseInitialWork();
    assert.equal(store.bytes, 2 * one + 10, "b is still kept");
    await second.parents.releaseInitialWork();
    assert.equal(store.bytes, 0, "every body announced, nothing held");
    const carried = (out: typeof first.out) => out.map((o) => [o.event.name, o.event.object]);
    assert.deepEqual(carried(first.out), [["a", ct("a", "1")]]);
    assert.deepEqual(carried(second.out), [
      ["b", ct("b", "2")],
      ["c", undefined],
    ]);
  });

  it("a new bridge weighs what each status records the function reconciled: metadata at once, children once listed", async () => {
    const { out, parents, children } = setup(true, { initial: true, functionFieldManager: "crdfn" });
    const job = (name: string, owner: string, writer = "crdfn", spec: unknown = { schedule: "* * * * *" }): WatchedObject => {
      const base = cj(name, "3", owner);
      return {
        ...base,
        spec,
        metadata: {
          ...base.metadata,
          annotations: { "crdfn.io/applied-hash": `h-${name}` },
          managedFields: [{ manager: writer, operation: writer === "crdfn" ? "Apply" : "Update", time: "2026-11-21T00:00:00Z" }],
        },
      };
    };
    /** A parent whose status records the children `left` (as their jobs were applied) and its metadata as it was then. */
    const recorded = (name: string, left: WatchedObject[], metadata: Partial<WatchedObject["metadata"]> = {}): WatchedObject => {
      const settled = ct(name, "1", { replicas: 1 }, {});
      const status = {
        observedGeneration: 1,
        reconciled: reconciledRecord(
          settled,
          left.map((c) => childMarkOf(c, "crdfn")),
        ),
      };
      return { ...settled, status, metadata: { ...settled.metadata, ...metadata } };
    };
    await parents.upsert(recorded("settled", [job("settled-job", "settled")]), "list", 1);
    await parents.upsert(recorded("stamped", [], { annotations: { "crdfn.io/resync": "2026-11-21T00:00:00Z" } }), "list", 1);
    await parents.upsert(recorded("relabelled", [], { labels: { tier: "gold" } }), "list", 1);
    await parents.upsert(recorded("lost-child", [job("lost-job", "lost-child")]), "list", 1);
    await parents.upsert(recorded("edited-child", [job("edited-job", "edited-child")]), "list", 1);
    await parents.upsert(recorded("new-child", []), "list", 1);
    await children.upsert(job("settled-job", "settled"), "list", 1);
    await children.upsert(job("edited-job", "edited-child", "kubectl-edit", { schedule: "1 * * * *" }), "list", 1);
    await children.upsert(job("stray-job", "new-child", "someone"), "list", 1);
    assert.equal(out.length, 0, "nothing before the children are listed");
    await parents.releaseInitialWork();
    assert.deepEqual(out.map((o) => o.event.name).sort(), ["edited-child", "lost-child", "new-child", "relabelled", "stamped"]);
    // Once each is reconciled and recorded afresh, a later bridge announces none of them.
    const again = setup(true, { initial: true, functionFieldManager: "crdfn" });
    const stamped = ct("stamped", "1", { replicas: 1 }, {});
    stamped.metadata = { ...stamped.metadata, annotations: { "crdfn.io/resync": "2026-11-21T00:00:00Z" } };
    await again.parents.upsert({ ...stamped, status: { observedGeneration: 1, reconciled: reconciledRecord(stamped, []) } }, "list", 1);
    const rerecorded = recorded("edited-child", []);
    const edited = job("edited-job", "edited-child", "kubectl-edit", { schedule: "1 * * * *" });
    const fresh = { ...rerecorded, status: { observedGeneration: 1, reconciled: reconciledRecord(rerecorded, [childMarkOf(edited, "crdfn")]) } };
    await again.parents.upsert(fresh, "list", 1);
    await again.children.upsert(edited, "list", 1);
    await again.parents.releaseInitialWork();
    assert.deepEqual(
      again.out.map((o) => o.event.name),
      [],
    );
  });
});

describe("the schedule: what the status has due", () => {
  it("schedules what the status has due, and announces it once, at its time, not before", async () => {
    const clock = fakeClock();
    const { out, parents } = setup(true, { clock, functionFieldManager: "crdfn" });
    const at = new Date(clock.nowMs() + 80).toISOString();
    const due = (rv: string) => ct("p", rv, { replicas: 1 }, { observedGeneration: 1, nextReconcile: { at, reason: "Retry", attempts: 2 } });
    await parents.upsert(due("5"), "list", 1);
    const before = out.length;
    assert.equal(parents.scheduled, 1);
    clock.advance(79);
    assert.equal(out.length, before, "not before its time");
    clock.advance(1);
    assert.deepEqual(
      out.slice(before).map((o) => [o.event.reason, o.cause]),
      [["retry", `due:${at}`]],
    );
    assert.equal(parents.scheduled, 0);
    await parents.upsert(due("6"), "watch");
    clock.advance(1000);
    assert.equal(out.filter((o) => o.event.reason === "retry").length, 1, "an `at` already announced is not announced again");
    parents.stop();
  });

  it("a change of the object's own supersedes what its status has due", async () => {
    const clock = fakeClock();
    const { out, parents } = setup(true, { clock, functionFieldManager: "crdfn" });
    const later = new Date(clock.nowMs() + 80).toISOString();
    await parents.upsert(ct("p", "7", { replicas: 1 }, { observedGeneration: 1, nextReconcile: { at: later, reason: "Requeue" } }), "list", 1);
    assert.equal(parents.scheduled, 1);
    await parents.upsert(ct("p", "8", { replicas: 3 }, { observedGeneration: 1, nextReconcile: { at: later, reason: "Requeue" } }), "watch");
    assert.equal(parents.scheduled, 0, "the reconcile this change announces records the schedule afresh");
    clock.advance(1000);
    assert.equal(out.filter((o) => o.event.reason === "requeue").length, 0);
    assert.equal(clock.pending, 0, "and no timer is left for it");
    parents.stop();
  });
});
