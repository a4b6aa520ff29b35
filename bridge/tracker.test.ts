import { describe, it } from "node:test";
import assert from "node:assert/strict";
import type { KeyEvent } from "../core/event.ts";
import type { KubeObject } from "./kube-object.ts";
import { ChildTracker, ParentTracker, type TrackerOptions } from "./tracker.ts";

const crontabs = { group: "stable.example.com", version: "v1", plural: "crontabs", kind: "CronTab", namespaced: true };
const cronjobs = { group: "batch", version: "v1", plural: "cronjobs", kind: "CronJob", namespaced: true };

function setup(skipStatusOnly = true) {
  const out: Array<{ key: string; event: KeyEvent; cause: string }> = [];
  const options: TrackerOptions = { cluster: "c", skipStatusOnly, now: () => new Date("2026-11-21T00:00:00Z"), announce: (key, event, cause) => Promise.resolve(void out.push({ key, event, cause })) };
  const parents = new ParentTracker(crontabs, options);
  const children = new ChildTracker(cronjobs, parents, true, options);
  return { out, parents, children };
}

const ct = (name: string, rv: string, spec: unknown = { replicas: 1 }, status: unknown = {}): KubeObject => ({
  metadata: { name, namespace: "ns", uid: `uid-${name}`, resourceVersion: rv, generation: 1 },
  spec,
  status,
});
const cj = (name: string, rv: string, owner: string | undefined, status: unknown = {}): KubeObject => ({
  metadata: {
    name,
    namespace: "ns",
    uid: `uid-${name}`,
    resourceVersion: rv,
    ...(owner === undefined ? {} : { ownerReferences: [{ apiVersion: "stable.example.com/v1", kind: "CronTab", name: owner, uid: `uid-${owner}`, controller: true }] }),
  },
  spec: { schedule: "* * * * *" },
  status,
});

describe("trackers", () => {
  it("announce new and changed objects, skip status-only changes", async () => {
    const { out, parents } = setup();
    await parents.upsert(ct("a", "1"), "list", 1);
    await parents.upsert(ct("a", "2", { replicas: 1 }, { ready: true }), "watch");
    await parents.upsert(ct("a", "3", { replicas: 2 }), "watch");
    assert.deepEqual(out.map((o) => [o.event.type, o.event.resourceVersion, o.event.reason]), [["ADDED", "1", "list"], ["MODIFIED", "3", "watch"]]);
    assert.equal(out[0]?.key, "stable.example.com/crontabs/ns/a");
  });

  it("announce every resourceVersion when the filter is off", async () => {
    const { out, parents } = setup(false);
    await parents.upsert(ct("a", "1"), "list", 1);
    await parents.upsert(ct("a", "2", { replicas: 1 }, { ready: true }), "watch");
    assert.equal(out.length, 2);
  });

  it("a relist sweeps vanished objects into DELETED events that are not deduplicated away", async () => {
    const { out, parents } = setup();
    const first = parents.beginList();
    await parents.upsert(ct("a", "1"), "list", first);
    await parents.upsert(ct("b", "2"), "list", first);
    const second = parents.beginList();
    await parents.upsert(ct("a", "1"), "relist", second);
    await parents.sweep(undefined, second);
    const last = out.at(-1);
    assert.equal(out.length, 3, "the unchanged object is not announced again");
    assert.equal(last?.event.type, "DELETED");
    assert.equal(last?.event.name, "b");
    assert.equal(last?.cause, "deleted");
  });

  it("a child announces its controller owner, with its own version as the cause; unowned children are not kept", async () => {
    const { out, parents, children } = setup();
    await parents.upsert(ct("p", "5"), "list", 1);
    await children.upsert(cj("stray", "6", undefined), "watch");
    assert.equal(children.size, 0);
    await children.upsert(cj("job", "7", "p"), "watch");
    await children.upsert(cj("job", "8", "p", { lastScheduleTime: "now" }), "watch");
    await children.remove(cj("job", "9", "p"));
    const childEvents = out.slice(1);
    assert.deepEqual(childEvents.map((o) => [o.event.name, o.event.resourceVersion, o.event.reason, o.cause]), [
      ["p", "5", "child", "child:uid-job:7"],
      ["p", "5", "child", "child:uid-job:8"],
      ["p", "5", "child", "child-gone:uid-job"],
    ]);
  });

  it("an orphaned child announces its former owner; a child of an unknown parent announces nothing", async () => {
    const { out, parents, children } = setup();
    await parents.upsert(ct("p", "5"), "list", 1);
    await children.upsert(cj("job", "7", "p"), "watch");
    await children.upsert(cj("job", "8", undefined), "watch");
    await children.upsert(cj("other", "9", "unknown"), "watch");
    assert.deepEqual(out.slice(1).map((o) => o.cause), ["child:uid-job:7", "child:uid-job:8"]);
  });
});
