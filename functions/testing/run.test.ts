// reconcileWithRuntime as docs/contract.md's testing section describes it: an object being deleted
// is finalized as the runtime finalizes it, its shared objects are in the result, and observed
// children are seen one reconcile after the one that applied them.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { z } from "zod";
import { defineOperator, type FinalizeContext, type FinalizeResult } from "../../core/operator.ts";
import { reconcileWithRuntime } from "./run.ts";
import { testObject } from "./object.ts";

const FINALIZER = "demo.example.com/registry";
const now = new Date("2026-03-01T12:00:00Z");

/** A listing contributes its URL to a shared registry and observes its own ConfigMap; `finalize` as given. */
function listings(finalize: (ctx: FinalizeContext) => FinalizeResult | Promise<FinalizeResult>) {
  const seen: Array<{ children: string[]; at: Date }> = [];
  const finalized: Date[] = [];
  const operator = defineOperator({
    resource: { group: "demo.example.com", version: "v1", plural: "listings", kind: "Listing" },
    spec: z.object({ url: z.string() }),
    owns: [{ group: "", version: "v1", kind: "ConfigMap", observe: true, prune: false }],
    shares: [{ group: "", kind: "ConfigMap", name: "registry" }],
    finalizer: FINALIZER,
    reconcile(listing, ctx) {
      seen.push({ children: Object.keys(ctx.children.of("ConfigMap")), at: ctx.now });
      return {
        children: [{ apiVersion: "v1", kind: "ConfigMap", metadata: { name: `${listing.metadata.name}-page` }, data: { url: listing.spec.url } }],
        shared: [{ apiVersion: "v1", kind: "ConfigMap", metadata: { name: "registry" }, data: { [listing.metadata.name]: listing.spec.url } }],
      };
    },
    async finalize(_listing, ctx) {
      finalized.push(ctx.now);
      return await finalize(ctx);
    },
  });
  return { operator, seen, finalized };
}

const released = async (ctx: FinalizeContext): Promise<FinalizeResult> => {
  await ctx.release({ apiVersion: "v1", kind: "ConfigMap", name: "registry" });
  return { done: true };
};

describe("reconcileWithRuntime", () => {
  it("finalizes, not reconciles, an object given a deletionTimestamp and the operator's finalizer", async () => {
    const { operator, seen, finalized } = listings(released);
    const kube = (await reconcileWithRuntime(operator, { metadata: { name: "other" }, spec: { url: "https://other" } })).kube;
    const object = testObject(operator, {
      metadata: { name: "a", finalizers: [FINALIZER], deletionTimestamp: "2026-03-01T11:59:00Z" },
      spec: { url: "https://a" },
    });
    seen.length = 0;
    const run = await reconcileWithRuntime(operator, object, { kube, now });
    assert.deepEqual(seen, [], "reconcile did not run");
    assert.deepEqual(finalized, [now], "finalize ran once, with ctx.now the run's now");
    assert.deepEqual(run.outcome, { result: "success", detail: "finalized", apiCalls: run.outcome.apiCalls });
    assert.equal(run.object, undefined, "the finalizer removed, the object is gone");
    assert.deepEqual(
      run.shared.map((o) => o.data),
      [{ other: "https://other" }],
    );
  });

  it("finalizes after a run that reconciled it, with deleting: its contribution to the shared object withdrawn", async () => {
    const { operator, finalized } = listings(released);
    const first = await reconcileWithRuntime(operator, { metadata: { name: "a" }, spec: { url: "https://a" } }, { now });
    assert.deepEqual(first.object?.metadata.finalizers, [FINALIZER]);
    assert.deepEqual(
      first.shared.map((o) => [o.metadata.name, o.data]),
      [["registry", { a: "https://a" }]],
    );
    const gone = await reconcileWithRuntime(operator, { metadata: { name: "a" }, spec: { url: "https://a" } }, { kube: first.kube, now, deleting: true });
    assert.equal(finalized.length, 1);
    assert.equal(gone.object, undefined);
    assert.deepEqual(gone.children, [], "its children were garbage-collected");
    assert.deepEqual(
      gone.shared.map((o) => o.data),
      [undefined],
      "the registry stays, without this object's fields",
    );
  });

  it("finalizes an object a previous run stored once it is given a deletionTimestamp (its finalizer is there since that run)", async () => {
    const { operator, finalized } = listings(released);
    const first = await reconcileWithRuntime(operator, { metadata: { name: "a" }, spec: { url: "https://a" } }, { now });
    const gone = await reconcileWithRuntime(
      operator,
      { metadata: { name: "a", deletionTimestamp: now.toISOString() }, spec: { url: "https://a" } },
      { kube: first.kube, now },
    );
    assert.equal(finalized.length, 1);
    assert.equal(gone.object, undefined);
  });

  it("keeps an object whose finalize is not done, and records when to finalize again", async () => {
    const { operator } = listings(() => ({ done: false, retryAfterSeconds: 30 }));
    const object = { metadata: { name: "a", finalizers: [FINALIZER], deletionTimestamp: "2026-03-01T11:59:00Z" }, spec: { url: "https://a" } };
    const run = await reconcileWithRuntime(operator, object, { now });
    assert.equal(run.outcome.result, "retry-later");
    assert.equal(run.object?.metadata.deletionTimestamp, "2026-03-01T11:59:00Z", "deleted since the time given");
    assert.deepEqual(run.object?.metadata.finalizers, [FINALIZER]);
    assert.deepEqual(run.nextReconcile, { at: "2026-03-01T12:00:30.000Z", reason: "Finalize", attempts: 1 });
  });

  it("leaves an object another finalizer holds to that finalizer's controller, as the runtime does", async () => {
    const { operator, seen, finalized } = listings(released);
    const object = { metadata: { name: "a", finalizers: ["someone.else/cleanup"], deletionTimestamp: "2026-03-01T11:59:00Z" }, spec: { url: "https://a" } };
    const run = await reconcileWithRuntime(operator, object, { now });
    assert.deepEqual([seen, finalized], [[], []]);
    assert.equal(run.outcome.result, "success");
    assert.deepEqual(run.object?.metadata.finalizers, ["someone.else/cleanup"]);
  });

  it("finds an object given a deletionTimestamp and no finalizers gone, as an API server deletes it at once", async () => {
    const { operator, seen, finalized } = listings(released);
    const run = await reconcileWithRuntime(
      operator,
      { metadata: { name: "a", deletionTimestamp: "2026-03-01T11:59:00Z" }, spec: { url: "https://a" } },
      { now },
    );
    assert.deepEqual([seen, finalized], [[], []]);
    assert.deepEqual(run.outcome, { result: "success", detail: "object is gone", apiCalls: run.outcome.apiCalls });
    assert.equal(run.object, undefined);
  });

  it("shows observed children one reconcile behind the apply: a child applied now is seen by the next reconcile", async () => {
    const { operator, seen } = listings(released);
    const first = await reconcileWithRuntime(operator, { metadata: { name: "a" }, spec: { url: "https://a" } }, { now });
    assert.deepEqual(
      first.children.map((c) => c.metadata.name),
      ["a-page"],
    );
    await reconcileWithRuntime(operator, { metadata: { name: "a" }, spec: { url: "https://a" } }, { kube: first.kube, now });
    assert.deepEqual(
      seen.map((s) => s.children),
      [[], ["a-page"]],
    );
  });
});
