// The child keys carry each child's fence (crdfn.io/parent-generation, core/fence.ts), whoever
// wrote it last: the function compares it with the generation it acts on, to know whether an
// unchanged child's fence must be raised.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { PARENT_GENERATION_ANNOTATION, type KeyEvent } from "../core/event.ts";
import type { WatchedObject } from "./watched-object.ts";
import { ChildTracker } from "./child-tracker.ts";
import { ParentTracker } from "./parent-tracker.ts";
import type { TrackerOptions } from "./tracker.ts";
import { fakeClock } from "../test/support/fake-clock.ts";

const crontabs = { group: "stable.example.com", version: "v1", plural: "crontabs", kind: "CronTab", namespaced: true };
const cronjobs = { group: "batch", version: "v1", plural: "cronjobs", kind: "CronJob", namespaced: true };

const parent = (rv: string, generation: number): WatchedObject => ({
  metadata: { name: "p", namespace: "ns", uid: "uid-p", resourceVersion: rv, generation },
  spec: { replicas: generation },
});
const child = (rv: string, fence: string | undefined): WatchedObject => ({
  metadata: {
    name: "job",
    namespace: "ns",
    uid: "uid-job",
    resourceVersion: rv,
    ownerReferences: [{ apiVersion: "stable.example.com/v1", kind: "CronTab", name: "p", uid: "uid-p", controller: true }],
    ...(fence === undefined ? {} : { annotations: { [PARENT_GENERATION_ANNOTATION]: fence } }),
  },
  spec: { schedule: "* * * * *" },
});

describe("child keys", () => {
  it("carry the child's fence when it has a valid one", async () => {
    const events: KeyEvent[] = [];
    const options: TrackerOptions = {
      cluster: "c",
      skipStatusOnly: true,
      now: () => new Date("2026-11-21T00:00:00Z"),
      timers: fakeClock().timers,
      announce: (_key, event) => Promise.resolve(void events.push(event)),
    };
    const parents = new ParentTracker(crontabs, options);
    const children = new ChildTracker(cronjobs, false, options);
    parents.owns(children);
    void parents.releaseInitialWork();
    await parents.upsert(parent("1", 1), "list", 1);
    await children.upsert(child("2", "7"), "watch");
    await parents.upsert(parent("3", 2), "watch");
    assert.equal(events.at(-1)?.children?.[0]?.parentGeneration, 7);
    await children.upsert(child("4", "not a number"), "watch");
    await parents.upsert(parent("5", 3), "watch");
    assert.equal(events.at(-1)?.children?.[0]?.parentGeneration, undefined);
  });
});
