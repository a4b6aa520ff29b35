import { describe, it } from "node:test";
import assert from "node:assert/strict";
import type { KeyEvent } from "../core/event.ts";
import type { WatchedObject } from "./watched-object.ts";
import { ReferenceTracker } from "./reference-tracker.ts";
import { ParentTracker } from "./parent-tracker.ts";
import type { AnnounceOptions } from "./sink.ts";
import type { TrackerOptions } from "./tracker.ts";
import { fakeClock } from "../test/support/fake-clock.ts";

const apps = { group: "example.com", version: "v1", plural: "apps", kind: "App", namespaced: true };
const secrets = { group: "", version: "v1", plural: "secrets", kind: "Secret", namespaced: true };

function setup() {
  const out: Array<{ key: string; event: KeyEvent; cause: string; options: AnnounceOptions | undefined }> = [];
  const options: TrackerOptions = {
    cluster: "c",
    skipStatusOnly: true,
    now: () => new Date("2026-11-21T00:00:00Z"),
    timers: fakeClock().timers,
    announce: (key, event, cause, opts) => Promise.resolve(void out.push({ key, event, cause, options: opts })),
  };
  const parents = new ParentTracker(apps, options);
  const references = new ReferenceTracker(secrets, options);
  parents.reads(references);
  void parents.releaseInitialWork();
  const byReference = () => out.filter((o) => o.event.reason === "reference").map((o) => o.event.name);
  return { out, parents, references, byReference };
}

/** An App whose status records the Secrets it read: name → the version read (undefined: absent). */
const app = (name: string, rv: string, read: Record<string, string | undefined>, namespace = "ns"): WatchedObject => ({
  metadata: { name, namespace, uid: `uid-${name}`, resourceVersion: rv, generation: 1 },
  spec: {},
  status: {
    observedGeneration: 1,
    references: Object.entries(read).map(([n, v]) => ({
      apiVersion: "v1",
      kind: "Secret",
      namespace,
      name: n,
      ...(v === undefined ? {} : { resourceVersion: v }),
    })),
  },
});
const secret = (name: string, rv: string, namespace = "ns"): WatchedObject => ({ metadata: { name, namespace, uid: `uid-${name}`, resourceVersion: rv } });

/** The parents listed, then the referenced kind listed (as the bridge orders them). */
async function listed(t: ReturnType<typeof setup>, apps: WatchedObject[], secrets: WatchedObject[]): Promise<void> {
  const p = t.parents.beginList();
  for (const a of apps) await t.parents.upsert(a, "list", p);
  await t.parents.sweep(undefined, p);
  const r = t.references.beginList();
  for (const s of secrets) await t.references.upsert(s, "list", r);
  await t.references.sweep(undefined, r);
}

describe("referenced objects", () => {
  it("a change of a referenced Secret announces the objects that read another version of it, and only those", async () => {
    const t = setup();
    await listed(
      t,
      [app("a", "1", { db: "10" }), app("b", "2", { other: "20" }), app("c", "3", {})],
      [secret("db", "10"), secret("other", "20"), secret("unread", "30")],
    );
    assert.deepEqual(t.byReference(), [], "what each read is what is there: nothing to announce");
    await t.references.upsert(secret("db", "11"), "watch");
    await t.references.upsert(secret("unread", "31"), "watch");
    assert.deepEqual(t.byReference(), ["a"]);
    const event = t.out.at(-1)!;
    assert.equal(event.event.type, "MODIFIED");
    assert.equal(event.cause, "ref:uid-db:11");
  });

  it("the function's own read of the new version is no news; the bridge's late sight of it neither", async () => {
    const t = setup();
    await listed(t, [app("a", "1", { db: "10" })], [secret("db", "10")]);
    // The function read 11 before the bridge saw it: its status says so first.
    await t.parents.upsert(app("a", "2", { db: "11" }), "watch");
    await t.references.upsert(secret("db", "11"), "watch");
    assert.deepEqual(t.byReference(), ["a"], "one reconcile too many while the bridge was behind, then nothing");
  });

  it("a Secret that appears or goes announces those that read it absent or present", async () => {
    const t = setup();
    await listed(t, [app("waits", "1", { later: undefined }), app("has", "2", { now: "5" })], [secret("now", "5")]);
    await t.references.upsert(secret("later", "6"), "watch");
    await t.references.remove(secret("now", "5"));
    assert.deepEqual(t.byReference(), ["waits", "has"]);
  });

  it("a status naming a version the bridge does not know (changed since the read) announces at once", async () => {
    const t = setup();
    await listed(t, [app("a", "1", {})], [secret("db", "12")]);
    await t.parents.upsert(app("a", "2", { db: "11" }), "watch");
    assert.deepEqual(t.byReference(), ["a"]);
    // The same record again (another status-only write) is not news.
    await t.parents.upsert(app("a", "3", { db: "11" }), "watch");
    assert.deepEqual(t.byReference(), ["a"]);
  });

  it("a new bridge's first list announces what changed, appeared or went while nobody watched, nothing else", async () => {
    const t = setup();
    await listed(
      t,
      [app("same", "1", { s: "1" }), app("changed", "2", { c: "1" }), app("appeared", "3", { n: undefined }), app("gone", "4", { g: "1" })],
      [secret("s", "1"), secret("c", "2"), secret("n", "1")],
    );
    assert.deepEqual(t.byReference().sort(), ["appeared", "changed", "gone"]);
  });

  it("an object that no longer references a Secret, or is deleted, is not announced for it", async () => {
    const t = setup();
    await listed(t, [app("a", "1", { db: "1" }), app("b", "2", { db: "1" })], [secret("db", "1")]);
    await t.parents.upsert(app("a", "3", {}), "watch");
    await t.parents.remove(app("b", "2", { db: "1" }));
    await t.references.upsert(secret("db", "2"), "watch");
    assert.deepEqual(t.byReference(), []);
    assert.equal(t.references.indexed, 0, "the index holds nothing for nobody");
  });

  it("keys are per namespace: a Secret of the same name elsewhere is another object", async () => {
    const t = setup();
    await listed(t, [app("a", "1", { db: "1" }, "one")], [secret("db", "1", "one"), secret("db", "7", "two")]);
    await t.references.upsert(secret("db", "8", "two"), "watch");
    assert.deepEqual(t.byReference(), []);
    await t.references.upsert(secret("db", "2", "one"), "watch");
    assert.deepEqual(t.byReference(), ["a"]);
  });
});
