// A starting bridge's first-list announcements, paced by the start window on a fake clock: at most
// `size` announced and unanswered; the next goes when one is answered by its status write, goes
// away, is announced by a change of its own, or times out; two resources share one window.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import type { KeyEvent } from "../core/event.ts";
import { ParentTracker } from "./parent-tracker.ts";
import { StartWindow } from "./start-window.ts";
import type { TrackerOptions } from "./tracker.ts";
import type { WatchedObject } from "./watched-object.ts";
import { fakeClock } from "../test/support/fake-clock.ts";

const crontabs = { group: "stable.example.com", version: "v1", plural: "crontabs", kind: "CronTab", namespaced: true };
const queues = { group: "stable.example.com", version: "v1", plural: "queues", kind: "Queue", namespaced: true };
const TIMEOUT_MS = 60_000;

function setup(size: number) {
  const clock = fakeClock();
  const sent: KeyEvent[] = [];
  const gauges = { waiting: 0, open: 0 };
  const window = new StartWindow({
    size,
    timeoutMs: TIMEOUT_MS,
    timers: clock.timers,
    onChange: (waiting, open) => Object.assign(gauges, { waiting, open }),
  });
  const options: TrackerOptions = {
    cluster: "c",
    skipStatusOnly: true,
    now: clock.now,
    timers: clock.timers,
    // What a status write offers only to refresh a pending event's body is not an announcement.
    announce: (_key, event, _cause, opts) => Promise.resolve(void (opts?.onlyIfPending || opts?.withdrawHeld ? undefined : sent.push(event))),
    functionFieldManager: "crdfn",
  };
  const tracker = (resource: typeof crontabs) => new ParentTracker(resource, options, { bodies: true, maxBodyBytes: 64 * 1024, startWindow: window });
  /** Lets the window's chained releases run, then names what was announced, in order. */
  const announced = async (): Promise<string[]> => {
    for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
    return sent.map((e) => `${e.plural}/${e.name} ${e.type}`);
  };
  return { clock, window, gauges, tracker, announced };
}

/** An object with generation 1, reconciled (observedGeneration 1) or not. */
const ct = (name: string, rv: string, reconciled = false, spec: unknown = { replicas: 1 }): WatchedObject => ({
  metadata: { name, namespace: "ns", uid: `uid-${name}`, resourceVersion: rv, generation: reconciled ? 1 : 2 },
  spec,
  status: { observedGeneration: 1 },
});

/** The object with a status write (still needing work: a failure's) by `manager` at `at`. */
const statusWritten = (name: string, rv: string, at: string, manager = "crdfn"): WatchedObject => {
  const o = ct(name, rv);
  return { ...o, metadata: { ...o.metadata, managedFields: [{ manager, operation: "Update", subresource: "status", time: at }] } };
};

/** Lists `names` as needing work and releases the first list's work. */
async function listNeedingWork(parents: ParentTracker, names: string[]): Promise<void> {
  for (const n of names) await parents.upsert(ct(n, "1"), "list", 1);
  await parents.releaseInitialWork();
}

describe("the start window", () => {
  it("announces at most `size` of the first list's work, and the next as each is answered by its status write", async () => {
    const { tracker, announced, gauges } = setup(2);
    const parents = tracker(crontabs);
    await listNeedingWork(parents, ["a", "b", "c", "d"]);
    assert.deepEqual(await announced(), ["crontabs/a ADDED", "crontabs/b ADDED"]);
    assert.deepEqual(gauges, { waiting: 2, open: 2 });
    // a's function writes its status: observedGeneration 2 = generation, so it needs no work.
    await parents.upsert({ ...ct("a", "5"), status: { observedGeneration: 2 } }, "watch");
    assert.deepEqual(await announced(), ["crontabs/a ADDED", "crontabs/b ADDED", "crontabs/c ADDED"]);
    assert.deepEqual(gauges, { waiting: 1, open: 2 });
  });

  it("frees a slot when its object is deleted, skips a waiting one that was deleted, and announces a changed one once", async () => {
    const { tracker, announced } = setup(1);
    const parents = tracker(crontabs);
    await listNeedingWork(parents, ["a", "b", "c", "d"]);
    assert.deepEqual(await announced(), ["crontabs/a ADDED"]);
    await parents.remove(ct("b", "6")); // waiting: never announced as ADDED
    await parents.upsert(ct("c", "7", false, { replicas: 9 }), "watch"); // a change of its own: announced now, not again
    await parents.remove(ct("a", "8")); // the open one goes: its slot is free
    assert.deepEqual(await announced(), ["crontabs/a ADDED", "crontabs/b DELETED", "crontabs/c MODIFIED", "crontabs/d ADDED", "crontabs/a DELETED"]);
  });

  it("a status write of the function's that still leaves work (a failure) answers it too; a write of someone else's does not", async () => {
    const { tracker, announced } = setup(1);
    const parents = tracker(crontabs);
    await listNeedingWork(parents, ["a", "b"]);
    await parents.upsert(statusWritten("a", "2", "2026-11-21T00:00:05Z", "kubectl"), "watch");
    assert.deepEqual(await announced(), ["crontabs/a ADDED"]);
    await parents.upsert(statusWritten("a", "3", "2026-11-21T00:00:09Z"), "watch");
    assert.deepEqual(await announced(), ["crontabs/a ADDED", "crontabs/b ADDED"]);
  });

  it("an unanswered slot is freed after the timeout: a stuck window slows, never stops", async () => {
    const { tracker, announced, clock } = setup(1);
    const parents = tracker(crontabs);
    await listNeedingWork(parents, ["a", "b"]);
    clock.advance(TIMEOUT_MS - 1);
    assert.deepEqual(await announced(), ["crontabs/a ADDED"]);
    clock.advance(1);
    assert.deepEqual(await announced(), ["crontabs/a ADDED", "crontabs/b ADDED"]);
  });

  it("is one window for all the bridge's resources, in the order their lists released them", async () => {
    const { tracker, announced, window } = setup(2);
    const [crons, qs] = [tracker(crontabs), tracker(queues)];
    await listNeedingWork(crons, ["a", "b"]);
    await listNeedingWork(qs, ["x", "y"]);
    assert.deepEqual(await announced(), ["crontabs/a ADDED", "crontabs/b ADDED"]);
    // x is answered while it waits (a message from before this bridge): it leaves the line unannounced.
    await qs.upsert(statusWritten("x", "9", "2026-11-21T00:00:05Z"), "watch");
    await crons.upsert({ ...ct("b", "5"), status: { observedGeneration: 2 } }, "watch");
    assert.deepEqual(await announced(), ["crontabs/a ADDED", "crontabs/b ADDED", "queues/y ADDED"]);
    assert.equal(window.waiting, 0);
  });

  it("size 0 announces everything at once, as before the window", async () => {
    const { tracker, announced } = setup(0);
    await listNeedingWork(tracker(crontabs), ["a", "b", "c"]);
    assert.deepEqual(await announced(), ["crontabs/a ADDED", "crontabs/b ADDED", "crontabs/c ADDED"]);
  });
});
