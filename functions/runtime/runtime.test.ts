// The runtime path through crdfn/testing's in-memory API server: what each step leaves on the
// object, its children and its Events.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { z } from "zod";
import { PermanentError, TemporaryError } from "../../core/errors.ts";
import { defineOperator, type CustomObject, type OperatorDefinition, type ReconcileResult } from "../../core/operator.ts";
import { createFakeKube, reconcileWithRuntime } from "../testing/index.ts";
import type { KubeApi, KubeObject } from "./kube-api.ts";
import { handleMessage, createRuntime } from "./runtime.ts";
import { pino } from "pino";
import { signedForTest, testRuntimeKeys } from "../../test/support/event-key.ts";

type Spec = { message: string };
const spec = z.object({ message: z.string().min(1) });

function greeter(reconcile?: (message: string) => ReconcileResult, extra: Partial<OperatorDefinition<Spec>> = {}) {
  return defineOperator<Spec>({
    resource: { group: "example.com", version: "v1", plural: "greetings", kind: "Greeting" },
    spec,
    owns: [{ group: "", version: "v1", kind: "ConfigMap" }],
    reconcile: (g) =>
      reconcile?.(g.spec.message) ?? {
        children: [{ apiVersion: "v1", kind: "ConfigMap", metadata: { name: `${g.metadata.name}-greeting` }, data: { message: g.spec.message } }],
        status: { phase: "Ready" },
      },
    ...extra,
  });
}
const hello = { metadata: { name: "hello" }, spec: { message: "hi" } };
const ready = (o: KubeObject | undefined) =>
  (o?.status as { conditions?: Array<{ type: string; status: string; reason: string; message: string }> } | undefined)?.conditions?.find(
    (c) => c.type === "Ready",
  );

describe("runtime (through the in-memory API server)", () => {
  it("creates the child with a controller owner reference and reports Ready=True with observedGeneration", async () => {
    const run = await reconcileWithRuntime(greeter(), hello);
    assert.equal(run.outcome.result, "success");
    assert.deepEqual(
      run.children.map((c) => [c.kind, c.metadata.name, (c.data as Record<string, string>).message]),
      [["ConfigMap", "hello-greeting", "hi"]],
    );
    assert.equal(ready(run.object)?.status, "True");
    assert.equal((run.object?.status as { observedGeneration: number }).observedGeneration, 1);
    assert.equal((run.object?.status as { phase: string }).phase, "Ready");
  });

  it("writes nothing when nothing changed", async () => {
    const op = greeter();
    const first = await reconcileWithRuntime(op, hello);
    const again = await reconcileWithRuntime(op, hello, { kube: first.kube });
    assert.equal(again.object?.metadata.resourceVersion, first.object?.metadata.resourceVersion);
    assert.deepEqual(again.children, first.children);
  });

  it("an invalid spec → Ready=False InvalidSpec and one Event, not one per retry", async () => {
    const op = greeter();
    const bad = { metadata: { name: "bad" }, spec: { message: "" } };
    const first = await reconcileWithRuntime(op, bad);
    assert.equal(first.outcome.result, "permanent");
    assert.equal(ready(first.object)?.reason, "InvalidSpec");
    const again = await reconcileWithRuntime(op, bad, { kube: first.kube });
    assert.equal(again.events.length, 1);
    assert.deepEqual(again.children, []);
  });

  it("a PermanentError names its reason and schedules nothing; a TemporaryError records its reason and the retry after its delay", async () => {
    const permanent = await reconcileWithRuntime(
      greeter(() => {
        throw new PermanentError("no such queue", "QueueMissing");
      }),
      hello,
    );
    assert.deepEqual([ready(permanent.object)?.reason, ready(permanent.object)?.message], ["QueueMissing", "no such queue"]);
    assert.equal(permanent.nextReconcile, undefined);
    const temporary = await reconcileWithRuntime(
      greeter(() => {
        throw new TemporaryError("not yet", 42, "WaitingForQueue");
      }),
      hello,
      { now: new Date("2026-01-01T00:00:00Z") },
    );
    assert.equal(temporary.outcome.result, "retry-later");
    assert.deepEqual([ready(temporary.object)?.status, ready(temporary.object)?.reason], ["False", "WaitingForQueue"]);
    assert.deepEqual(temporary.nextReconcile, { at: "2026-01-01T00:00:42.000Z", reason: "Retry", attempts: 1 });
  });

  it("requeueAfterSeconds: one schedule per object, in its status, moved on by each reconcile", async () => {
    const op = greeter(() => ({ requeueAfterSeconds: 60 }));
    const first = await reconcileWithRuntime(op, hello, { now: new Date("2026-01-01T00:00:00Z") });
    assert.deepEqual(first.nextReconcile, { at: "2026-01-01T00:01:00.000Z", reason: "Requeue" });
    assert.equal(ready(first.object)?.status, "True");
    const again = await reconcileWithRuntime(op, hello, { kube: first.kube, now: new Date("2026-01-01T00:01:00Z") });
    assert.deepEqual(again.nextReconcile, { at: "2026-01-01T00:02:00.000Z", reason: "Requeue" }, "the same one field: a chain cannot fork");
    const done = await reconcileWithRuntime(
      greeter(() => ({})),
      hello,
      { kube: first.kube },
    );
    assert.equal(done.nextReconcile, undefined, "a reconcile that asks for nothing clears it");
  });

  it("adds the finalizer before reconciling; deleting runs finalize and then lets the object go", async () => {
    const finalized: string[] = [];
    const op = greeter(undefined, { finalizer: "example.com/cleanup", finalize: (g) => (finalized.push(g.metadata.name), { done: true }) });
    const first = await reconcileWithRuntime(op, hello);
    assert.deepEqual(first.object?.metadata.finalizers, ["example.com/cleanup"]);
    const deleted = await reconcileWithRuntime(op, hello, { kube: first.kube, deleting: true });
    assert.deepEqual(finalized, ["hello"]);
    assert.equal(deleted.object, undefined);
    assert.deepEqual(deleted.children, [], "its children were garbage-collected");
  });

  it("a 409 Conflict on the status write re-reads and succeeds", async () => {
    const kube = createFakeKube();
    const ref = { group: "example.com", version: "v1", plural: "greetings", namespace: "default", name: "hello" };
    const created = kube.put(ref, { apiVersion: "example.com/v1", kind: "Greeting", ...hello });
    let interfere = true;
    // Another writer changes the object between the runtime's read and its status write, once.
    const api: KubeApi = {
      ...kube,
      replaceStatus: async (r, o) => {
        if (interfere) {
          interfere = false;
          await kube.mergePatch(ref, { metadata: { labels: { touched: "yes" } } });
        }
        return kube.replaceStatus(r, o);
      },
    };
    const runtime = createRuntime(greeter(), { api, logger: pino({ level: "silent" }), clock: () => new Date(), ...testRuntimeKeys(greeter(), "t") });
    const event = {
      v: 1,
      cluster: "t",
      group: "example.com",
      version: "v1",
      plural: "greetings",
      kind: "Greeting",
      namespace: "default",
      name: "hello",
      uid: created.metadata.uid,
      resourceVersion: created.metadata.resourceVersion,
      generation: 1,
      type: "ADDED",
      observedAt: new Date().toISOString(),
    };
    const outcome = await handleMessage(runtime, { id: "1", body: JSON.stringify(signedForTest(event)) });
    assert.equal(outcome.result, "success");
    assert.equal(ready(await kube.get(ref))?.status, "True");
  });
});

describe("reconcileWithRuntime", () => {
  it("takes an object typed as reconcile sees it (server-set metadata is the fake's to assign)", async () => {
    const typed: CustomObject<Spec> = {
      apiVersion: "example.com/v1",
      kind: "Greeting",
      metadata: { name: "typed", namespace: "team", uid: "ignored", resourceVersion: "9", generation: 7 },
      spec: { message: "hey" },
    };
    const run = await reconcileWithRuntime(greeter(), typed);
    assert.equal(run.object?.metadata.namespace, "team");
    assert.equal(run.object?.metadata.generation, 1);
    assert.deepEqual(
      run.children.map((c) => c.metadata.namespace),
      ["team"],
    );
  });
});
