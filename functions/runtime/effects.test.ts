// The effect step and the timer through the whole runtime path (crdfn/testing's in-memory API
// server): effects run before reconcile, their status is recorded before any child is written,
// failures are the object's, and `every` rides on status.nextReconcile.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { z } from "zod";
import { PermanentError, TemporaryError } from "../../core/errors.ts";
import { defineOperator, type EffectsContext, type OperatorDefinition } from "../../core/operator.ts";
import { effectsContext, reconcileWithRuntime } from "../testing/index.ts";
import type { KubeObject } from "./kube-api.ts";

type Spec = { size: number };
type Status = { url?: string; phase?: string };
const now = new Date("2026-01-01T00:00:00Z");

/** A "bucket" kept outside the cluster (a Map): effects make it, finalize removes it. */
function bucketOperator(outside: Map<string, number>, extra: Partial<OperatorDefinition<Spec, unknown, Status>> = {}, seen: EffectsContext[] = []) {
  return defineOperator<Spec, unknown, Status>({
    resource: { group: "example.com", version: "v1", plural: "buckets", kind: "Bucket" },
    spec: z.object({ size: z.number().int() }),
    status: z.object({ url: z.string().optional(), phase: z.string().optional() }),
    owns: [{ group: "", version: "v1", kind: "ConfigMap" }],
    finalizer: "example.com/bucket",
    effects(bucket, ctx) {
      seen.push(ctx);
      outside.set(bucket.metadata.name, bucket.spec.size);
      return Promise.resolve({ status: { url: `s3://${bucket.metadata.name}` } });
    },
    // Reconcile sees what effects recorded, in the object's status.
    reconcile: (bucket) => ({
      children:
        typeof bucket.status?.url === "string"
          ? [{ apiVersion: "v1", kind: "ConfigMap", metadata: { name: `${bucket.metadata.name}-bucket` }, data: { url: bucket.status.url } }]
          : [],
      status: { phase: "Ready" },
    }),
    finalize(bucket) {
      outside.delete(bucket.metadata.name);
      return { done: true };
    },
    ...extra,
  });
}
const b = { metadata: { name: "b" }, spec: { size: 3 } };
const ready = (o: KubeObject | undefined) =>
  (o?.status as { conditions?: Array<{ type: string; status: string; reason: string; message: string }> } | undefined)?.conditions?.find(
    (c) => c.type === "Ready",
  );

describe("effects (runtime)", () => {
  it("run before reconcile, which wires what they made into a child; both status parts are kept", async () => {
    const outside = new Map<string, number>();
    const run = await reconcileWithRuntime(bucketOperator(outside), b, { now });
    assert.equal(run.outcome.result, "success");
    assert.deepEqual([...outside], [["b", 3]]);
    assert.deepEqual(
      run.children.map((c) => c.data),
      [{ url: "s3://b" }],
    );
    assert.equal((run.object?.status as Status).url, "s3://b");
    assert.equal((run.object?.status as Status).phase, "Ready");
  });

  it("get one idempotency key per object and generation, the same on every run of it, and the function's environment", async () => {
    const seen: EffectsContext[] = [];
    const op = bucketOperator(new Map(), {}, seen);
    const first = await reconcileWithRuntime(op, b, { now, env: { REGION: "eu-west-1" } });
    await reconcileWithRuntime(op, b, { now, kube: first.kube });
    await reconcileWithRuntime(op, { ...b, spec: { size: 4 } }, { now, kube: first.kube });
    assert.equal(seen[0]?.idempotencyKey, seen[1]?.idempotencyKey);
    assert.notEqual(seen[1]?.idempotencyKey, seen[2]?.idempotencyKey);
    assert.match(seen[0]!.idempotencyKey, /^[0-9a-f]{32}$/);
    assert.equal(seen[0]?.env.REGION, "eu-west-1");
    // The kit's effectsContext derives the same key from the object.
    const object = first.object!;
    assert.equal(
      effectsContext({ object: { metadata: { uid: object.metadata.uid!, generation: object.metadata.generation! } } }).idempotencyKey,
      seen[0]?.idempotencyKey,
    );
  });

  it("what they made is recorded before any child is written: a child that fails leaves it on the object", async () => {
    const outside = new Map<string, number>();
    const op = bucketOperator(outside);
    const victim = { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "b-bucket" }, data: { mine: "yes" } };
    const run = await reconcileWithRuntime(op, b, { now, objects: [victim] });
    assert.equal(ready(run.object)?.reason, "ChildConflict");
    assert.equal((run.object?.status as Status).url, "s3://b");
  });

  it("a throw is EffectsError, retried with backoff — even one that reads like an outage of the cluster", async () => {
    const op = bucketOperator(new Map(), { effects: () => Promise.reject(new Error("connect ETIMEDOUT: request timed out")) });
    const run = await reconcileWithRuntime(op, b, { now });
    assert.equal(run.outcome.result, "retry-later");
    assert.equal(ready(run.object)?.reason, "EffectsError");
    assert.match(ready(run.object)?.message ?? "", /timed out/);
    assert.equal(run.nextReconcile?.reason, "Retry");
    assert.deepEqual(run.children, [], "reconcile did not run");
  });

  it("TemporaryError and PermanentError mean what they mean in reconcile", async () => {
    const later = await reconcileWithRuntime(
      bucketOperator(new Map(), { effects: () => Promise.reject(new TemporaryError("quota", 120, "QuotaExceeded")) }),
      b,
      { now },
    );
    assert.equal(ready(later.object)?.reason, "QuotaExceeded");
    assert.equal(later.nextReconcile?.at, new Date(now.getTime() + 120_000).toISOString());
    const never = await reconcileWithRuntime(
      bucketOperator(new Map(), { effects: () => Promise.reject(new PermanentError("no such region", "BadRegion")) }),
      b,
      { now },
    );
    assert.equal(never.outcome.result, "permanent");
    assert.equal(ready(never.object)?.reason, "BadRegion");
  });

  it("a status that does not fit the status schema is InvalidStatus, before anything is written", async () => {
    const op = bucketOperator(new Map(), { effects: () => Promise.resolve({ status: { url: 42 as unknown as string } }) });
    const run = await reconcileWithRuntime(op, b, { now });
    assert.equal(ready(run.object)?.reason, "InvalidStatus");
  });

  it("are undone by finalize, which gets the environment too", async () => {
    const outside = new Map<string, number>();
    let env: Readonly<Record<string, string | undefined>> | undefined;
    const op = bucketOperator(outside, {
      finalize(bucket, ctx) {
        env = ctx.env;
        outside.delete(bucket.metadata.name);
        return { done: true };
      },
    });
    const made = await reconcileWithRuntime(op, b, { now });
    const gone = await reconcileWithRuntime(op, b, { now, kube: made.kube, deleting: true, env: { REGION: "x" } });
    assert.equal(gone.object, undefined);
    assert.deepEqual([...outside], []);
    assert.equal(env?.REGION, "x");
  });
});

describe("timers (runtime)", () => {
  const ticking = (every: number, requeueAfterSeconds?: number) =>
    defineOperator({
      resource: { group: "example.com", version: "v1", plural: "ticks", kind: "Tick" },
      spec: z.object({}),
      every,
      reconcile: () => ({ status: { phase: "Ready" }, ...(requeueAfterSeconds === undefined ? {} : { requeueAfterSeconds }) }),
    });

  it("every: the object is due again that long after a successful reconcile (Requeue)", async () => {
    const run = await reconcileWithRuntime(ticking(300), { metadata: { name: "t" }, spec: {} }, { now });
    assert.deepEqual(run.nextReconcile, { at: new Date(now.getTime() + 300_000).toISOString(), reason: "Requeue", timer: true });
    assert.equal(run.outcome.result, "success");
  });

  it("a sooner requeueAfterSeconds wins; a later one does not", async () => {
    const sooner = await reconcileWithRuntime(ticking(300, 10), { metadata: { name: "t" }, spec: {} }, { now });
    assert.equal(sooner.nextReconcile?.at, new Date(now.getTime() + 10_000).toISOString());
    assert.equal(sooner.nextReconcile?.timer, undefined, "a requeue, not the timer");
    const later = await reconcileWithRuntime(ticking(300, 900), { metadata: { name: "t" }, spec: {} }, { now });
    assert.equal(later.nextReconcile?.at, new Date(now.getTime() + 300_000).toISOString());
    assert.equal(later.nextReconcile?.timer, true);
  });
});
