// What finalize may return, held by the type checker (`tsc --noEmit -p .` checks this file, and
// each expected error below must occur) and at run time by what the runtime does with it.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { z } from "zod";
import { defineOperator, type OperatorDefinition } from "../../core/operator.ts";
import { reconcileWithRuntime } from "./index.ts";

const base = {
  resource: { group: "example.com", version: "v1", plural: "widgets", kind: "Widget" },
  spec: z.object({ size: z.number() }),
  finalizer: "example.com/cleanup",
  reconcile: () => ({}),
};

describe("finalize's result", () => {
  it("is done, and when not done, when to try again", () => {
    defineOperator({ ...base, finalize: () => ({ done: true }) });
    defineOperator({ ...base, finalize: (w) => (w.spec.size > 1 ? { done: false, retryAfterSeconds: 30 } : { done: true }) });
    defineOperator({
      ...base,
      async finalize(w, ctx) {
        await Promise.resolve(ctx.now.getTime() + w.spec.size);
        return { done: ctx.env.REGION !== undefined };
      },
    });
  });

  it("refuses any other key, though an async method's return is never checked for excess keys", () => {
    defineOperator({
      ...base,
      // @ts-expect-error finalize writes no shared objects (withdraw them with ctx.release)
      async finalize() {
        await Promise.resolve();
        return { done: true, shared: [{ apiVersion: "v1", kind: "ConfigMap", metadata: { name: "registry" } }] };
      },
    });
    // @ts-expect-error a finalize that is not done retries after retryAfterSeconds, not requeueAfterSeconds
    defineOperator({ ...base, finalize: () => ({ done: false, requeueAfterSeconds: 5 }) });
    defineOperator({
      ...base,
      // @ts-expect-error nor a key of its own: "finalize returns only done and retryAfterSeconds, not note"
      async finalize() {
        await Promise.resolve();
        return { done: true, note: "bye" };
      },
    });
  });

  it("refuses reconcile's keys even where the definition's type arguments are given", () => {
    // @ts-expect-error status is reconcile's
    defineOperator<{ size: number }>({ ...base, finalize: () => ({ done: true, status: { gone: true } }) });
    const typed: OperatorDefinition<{ size: number }> = {
      ...base,
      // @ts-expect-error children are reconcile's (and garbage-collected with the object)
      finalize: () => Promise.resolve({ done: true, children: [] }),
    };
    assert.ok(typed);
  });

  it("is all the runtime reads: a key given anyway (by untyped code) is ignored", async () => {
    const op = defineOperator({ ...base, owns: [{ group: "", version: "v1", kind: "ConfigMap" }], finalize: () => ({ done: true }) });
    // As plain JavaScript would: no type checks.
    const untyped = {
      ...op,
      finalize: () => ({ done: true, shared: [{ apiVersion: "v1", kind: "ConfigMap", metadata: { name: "x" } }] }),
    } as unknown as typeof op;
    const first = await reconcileWithRuntime(untyped, { metadata: { name: "w" }, spec: { size: 1 } });
    const gone = await reconcileWithRuntime(untyped, { metadata: { name: "w" }, spec: { size: 1 } }, { kube: first.kube, deleting: true });
    assert.equal(gone.object, undefined);
    assert.deepEqual(gone.kube.objects({ kind: "ConfigMap" }), []);
  });
});
