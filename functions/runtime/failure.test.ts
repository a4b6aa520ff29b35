// Failures as a user sees them with kubectl: a condition on the object and one aggregated Event.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { z } from "zod";
import { defineOperator, type ReconcileResult } from "../../core/operator.ts";
import { pino } from "pino";
import { ApiError } from "../../clients/kube-http.ts";
import { createFakeKube, reconcileWithRuntime } from "../testing/index.ts";
import type { KubeApi, KubeObject } from "./kube-api.ts";
import { handleMessage, createRuntime } from "./runtime.ts";
import { signedForTest, testRuntimeKeys } from "../../test/support/event-key.ts";

function failing(reconcile: () => unknown, status?: z.ZodType<Record<string, unknown>>) {
  return defineOperator({
    resource: { group: "example.com", version: "v1", plural: "things", kind: "Thing" },
    spec: z.object({}),
    ...(status ? { status } : {}),
    reconcile: reconcile as () => ReconcileResult,
  });
}
const thing = { metadata: { name: "t" }, spec: {} };
const ready = (o: KubeObject | undefined) =>
  (o?.status as { conditions?: Array<{ type: string; status: string; reason: string; message: string }> } | undefined)?.conditions?.find(
    (c) => c.type === "Ready",
  );

describe("failures", () => {
  it("an unexpected throw → Ready=False ReconcileError, the attempt and next retry on the object (growing backoff), ONE Event whose series counts them; the message is done", async () => {
    const op = failing(() => {
      throw new Error("boom");
    });
    const t0 = new Date("2026-01-01T00:00:00Z");
    const first = await reconcileWithRuntime(op, thing, { now: t0 });
    assert.equal(first.outcome.result, "retry-later");
    assert.deepEqual([ready(first.object)?.status, ready(first.object)?.reason, ready(first.object)?.message], ["False", "ReconcileError", "boom"]);
    assert.equal(first.nextReconcile?.attempts, 1);
    let last = first;
    const delays: number[] = [];
    for (let i = 0; i < 3; i++) {
      last = await reconcileWithRuntime(op, thing, { kube: first.kube, now: t0 });
      delays.push(Date.parse(last.nextReconcile?.at ?? "") - t0.getTime());
    }
    assert.equal(last.nextReconcile?.attempts, 4);
    assert.equal(last.nextReconcile?.reason, "Retry");
    assert.ok(delays[0]! < delays[1]! && delays[1]! < delays[2]!, `backoff grows: ${delays.join(", ")} ms`);
    assert.equal(last.events.length, 1);
    const [event] = last.events;
    assert.deepEqual(
      [event?.apiVersion, event?.reason, event?.note, (event?.series as { count: number }).count],
      ["events.k8s.io/v1", "ReconcileError", "boom", 4],
    );
  });

  it("a new generation starts its attempts again", async () => {
    const op = failing(() => {
      throw new Error("boom");
    });
    const first = await reconcileWithRuntime(op, thing);
    await reconcileWithRuntime(op, thing, { kube: first.kube });
    const changed = await reconcileWithRuntime(op, { ...thing, spec: { changed: true } }, { kube: first.kube });
    assert.equal(changed.nextReconcile?.attempts, 1);
  });

  it("a thrown non-Error is reported with its text", async () => {
    for (const [thrown, text] of [
      [{ code: 7 }, 'thrown: {"code":7}'],
      [undefined, "undefined was thrown"],
      ["plain", "plain"],
    ] as const) {
      const throws = () => {
        // eslint-disable-next-line @typescript-eslint/only-throw-error -- throwing a non-Error is the case under test
        throw thrown;
      };
      const run = await reconcileWithRuntime(failing(throws), thing);
      assert.equal(ready(run.object)?.message, text);
    }
  });

  it("a Promise from reconcile is refused as a permanent AsyncReconcile, with no unhandled rejection", async () => {
    const run = await reconcileWithRuntime(
      failing(() => Promise.reject(new Error("later"))),
      thing,
    );
    assert.deepEqual([run.outcome.result, ready(run.object)?.reason], ["permanent", "AsyncReconcile"]);
    assert.match(ready(run.object)?.message ?? "", /must be synchronous/);
    assert.equal(run.events.length, 1);
  });

  it("a status that fails the operator's status schema is not written: InvalidStatus says why", async () => {
    const op = failing(() => ({ status: { replicas: "three" } }), z.object({ replicas: z.number().int() }));
    const run = await reconcileWithRuntime(op, thing);
    assert.deepEqual([run.outcome.result, ready(run.object)?.reason], ["permanent", "InvalidStatus"]);
    assert.match(ready(run.object)?.message ?? "", /replicas/);
    assert.equal((run.object?.status as Record<string, unknown>).replicas, undefined);
  });

  it("after a failure, the first success of the same generation replaces the retry with the requeue", async () => {
    let fail = true;
    const op = failing(() => {
      if (fail) throw new Error("flaky");
      return { requeueAfterSeconds: 30 };
    });
    const first = await reconcileWithRuntime(op, thing);
    fail = false;
    const recovered = await reconcileWithRuntime(op, thing, { kube: first.kube });
    assert.equal(first.nextReconcile?.reason, "Retry");
    assert.equal(ready(recovered.object)?.status, "True");
    assert.equal(recovered.nextReconcile?.reason, "Requeue");
  });

  it("a 404 on a write means the object is gone: success, not a retry", async () => {
    const kube = createFakeKube();
    const ref = { group: "example.com", version: "v1", plural: "things", namespace: "default", name: "t" };
    const created = kube.put(ref, { apiVersion: "example.com/v1", kind: "Thing", ...thing });
    // The object is deleted between the runtime's read and its status write.
    const api: KubeApi = { ...kube, replaceStatus: async (r, o, m) => (await kube.delete(ref), kube.replaceStatus(r, o, m)) };
    const runtime = createRuntime(
      failing(() => ({})),
      { api, logger: pino({ level: "silent" }), clock: () => new Date(), ...testRuntimeKeys({ resource: { group: "example.com", plural: "things" } }, "t") },
    );
    const event = {
      v: 1,
      cluster: "t",
      group: "example.com",
      version: "v1",
      plural: "things",
      kind: "Thing",
      namespace: "default",
      name: "t",
      uid: created.metadata.uid,
      resourceVersion: created.metadata.resourceVersion,
      generation: 1,
      type: "ADDED",
      observedAt: new Date().toISOString(),
    };
    const outcome = await handleMessage(runtime, { id: "1", body: JSON.stringify(signedForTest(event)) });
    assert.deepEqual([outcome.result, outcome.detail], ["success", "object is gone"]);
  });

  it("a status write the cluster refuses: the message is failed (to be retried, then dead-lettered), one error line, a StatusWriteRefused Event", async () => {
    const kube = createFakeKube();
    const ref = { group: "example.com", version: "v1", plural: "things", namespace: "default", name: "t" };
    const created = kube.put(ref, { apiVersion: "example.com/v1", kind: "Thing", ...thing });
    const refused = new ApiError(
      403,
      "Forbidden",
      "things.example.com \"t\" is forbidden: ValidatingAdmissionPolicy 'frozen' denied request: frozen things take no status",
    );
    const api: KubeApi = { ...kube, replaceStatus: () => Promise.reject(refused) };
    const lines: Array<Record<string, unknown>> = [];
    const logger = pino({ level: "info" }, { write: (l: string) => void lines.push(JSON.parse(l) as Record<string, unknown>) });
    const runtime = createRuntime(
      failing(() => ({ status: { n: 1 } })),
      { api, logger, clock: () => new Date(), ...testRuntimeKeys({ resource: { group: "example.com", plural: "things" } }, "t") },
    );
    const event = {
      v: 1,
      cluster: "t",
      group: "example.com",
      version: "v1",
      plural: "things",
      kind: "Thing",
      namespace: "default",
      name: "t",
      uid: created.metadata.uid,
      resourceVersion: created.metadata.resourceVersion,
      generation: 1,
      type: "ADDED",
      observedAt: new Date().toISOString(),
    };
    const outcome = await handleMessage(runtime, { id: "1", body: JSON.stringify(signedForTest(event)) });
    assert.equal(outcome.result, "retry");
    assert.match(outcome.detail ?? "", /the status write was refused \(403 .*frozen things take no status/);
    assert.equal(
      lines.filter((l) => l.msg === "cannot record the outcome on the object: its status write was refused; the message is retried and then dead-lettered")
        .length,
      1,
    );
    const events = kube.events();
    assert.deepEqual(
      events.map((e) => e.reason),
      ["StatusWriteRefused"],
    );
  });
});
