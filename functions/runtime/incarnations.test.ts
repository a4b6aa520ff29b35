// Identity, not names: an event acts only on the object it was written for. A name holds one
// object at a time, so an event of an earlier object of the name (deleted and re-created since:
// a dead letter redriven, a backlog that spans the delete) must change nothing of the live one;
// a child's controller is never changed by a write; a fence above anything the live parent can
// have written is reported on the object. Through the in-memory API server, as the operator's
// function meets it (the policy's ownership and fence rules as the generated policy words them).
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { pino } from "pino";
import { z } from "zod";
import { PARENT_GENERATION_ANNOTATION, type KeyEvent } from "../../core/event.ts";
import { defineOperator, type Operator } from "../../core/operator.ts";
import { isOtherIncarnationRefusal, ownershipVerdict, refusedChildUid } from "../../core/ownership.ts";
import { reconcileWithRuntime, type FakeKube } from "../testing/index.ts";
import { asTheFunction } from "../testing/run.ts";
import type { KubeObject } from "./kube-api.ts";
import { handleMessage, createRuntime } from "./runtime.ts";
import { signedForTest, testRuntimeKeys } from "../../test/support/event-key.ts";

type Spec = { image: string };
const web = defineOperator<Spec>({
  resource: { group: "example.com", version: "v1", plural: "webs", kind: "Web" },
  spec: z.object({ image: z.string() }),
  owns: [{ group: "", version: "v1", kind: "ConfigMap" }],
  reconcile: (o) => ({ children: [{ apiVersion: "v1", kind: "ConfigMap", metadata: { name: `${o.metadata.name}-app` }, data: { image: o.spec.image } }] }),
}) as Operator<unknown>;

const parentRef = { group: "example.com", version: "v1", plural: "webs", namespace: "default", name: "w" };
const childRef = { group: "", version: "v1", plural: "configmaps", namespace: "default", name: "w-app" };
const ready = (o: KubeObject | undefined) =>
  (
    o?.status as { conditions?: Array<{ type: string; status: string; reason: string; message: string; observedGeneration?: number }> } | undefined
  )?.conditions?.find((c) => c.type === "Ready");

/** The event the bridge published when it saw `body`, with its children's keys as the index held them then (none: the first event). */
function eventOf(body: KubeObject, children: KeyEvent["children"] = []): KeyEvent {
  return {
    v: 2,
    cluster: "test",
    group: "example.com",
    version: "v1",
    plural: "webs",
    kind: "Web",
    namespace: "default",
    name: "w",
    uid: body.metadata.uid ?? "",
    resourceVersion: body.metadata.resourceVersion ?? "",
    generation: body.metadata.generation ?? 0,
    type: "ADDED",
    reason: "watch",
    observedAt: new Date().toISOString(),
    object: body as unknown as NonNullable<KeyEvent["object"]>,
    children,
  };
}

async function deliver(kube: FakeKube, event: KeyEvent, receiveCount = 1) {
  const runtime = createRuntime(web, {
    api: asTheFunction(kube, web),
    logger: pino({ level: "silent" }),
    clock: () => new Date("2026-01-01T00:00:00Z"),
    ...testRuntimeKeys(web, "test"),
  });
  return handleMessage(runtime, { id: `m-${event.resourceVersion}`, body: JSON.stringify(signedForTest(event)), receiveCount });
}

/** `w` created with image a and reconciled, its first event kept; deleted, created again with image b and reconciled. */
async function recreated(): Promise<{ kube: FakeKube; kept: KeyEvent; live: KubeObject; child: KubeObject }> {
  const first = await reconcileWithRuntime(web, { metadata: { name: "w" }, spec: { image: "a" } });
  const kube = first.kube;
  const kept = eventOf((await kube.get(parentRef))!);
  await kube.delete(parentRef);
  // The garbage collector has not come yet: the earlier object's child is still there.
  await reconcileWithRuntime(web, { metadata: { name: "w" }, spec: { image: "b" } }, { kube });
  const live = (await kube.get(parentRef))!;
  const child = (await kube.get(childRef))!;
  assert.notEqual(live.metadata.uid, kept.uid, "a new object of the name");
  assert.deepEqual(child.data, { image: "b" }, "the new object took its predecessor's child over");
  return { kube, kept, live, child };
}

describe("incarnations", () => {
  it("an earlier incarnation's event, re-sent with its carried body or read afresh, changes nothing of the live object or its children", async () => {
    const { kube, kept, live, child } = await recreated();
    for (const receiveCount of [1, 2]) {
      const outcome = await deliver(kube, kept, receiveCount);
      assert.equal(outcome.result, "success", `receive ${receiveCount}: ${outcome.detail ?? ""}`);
      assert.equal(outcome.result === "success" && outcome.earlierIncarnation, true, `receive ${receiveCount}: ${outcome.detail ?? ""}`);
      const after = (await kube.get(childRef))!;
      assert.equal(after.metadata.resourceVersion, child.metadata.resourceVersion, `receive ${receiveCount}: the live child was not written`);
      assert.equal((await kube.get(parentRef))?.metadata.resourceVersion, live.metadata.resourceVersion, `receive ${receiveCount}: nor the live parent`);
    }
    assert.equal(kube.events().filter((e) => JSON.stringify(e).includes(kept.uid)).length, 0, "no Event about the gone object");
  });

  it("a write never changes a child's controller, not even to another object of the same name: refused in words that name the child's uid", () => {
    const controlled = (uid: string, name = "w") => ({
      metadata: { name: "w-app", uid: "child-uid", ownerReferences: [{ apiVersion: "example.com/v1", kind: "Web", name, uid, controller: true }] },
    });
    const kind = { group: "", kind: "ConfigMap", plural: "configmaps" };
    assert.equal(ownershipVerdict(web, "web", kind, "w-app", controlled("u1"), controlled("u1")), undefined, "the same controller");
    const sameName = ownershipVerdict(web, "web", kind, "w-app", controlled("u1"), controlled("made-up"));
    assert.ok(sameName !== undefined && isOtherIncarnationRefusal({ code: 403, message: sameName }), sameName);
    assert.equal(refusedChildUid(sameName), "child-uid");
    const otherName = ownershipVerdict(web, "web", kind, "w-app", controlled("u1"), controlled("u2", "v"));
    assert.match(otherName ?? "", /may change or delete configmaps w-app only if that Web already controls it/);
  });

  it("a fence raised above the live generation is reported within one reconcile (Ready=False FenceAhead, honest observedGeneration) and mended by lowering it", async () => {
    const first = await reconcileWithRuntime(web, { metadata: { name: "w" }, spec: { image: "a" } });
    const kube = first.kube;
    // An admin (or a tool copying annotations) raises the fence: the policy binds only the function.
    const setFence = (value: string) => kube.mergePatch(childRef, { metadata: { annotations: { [PARENT_GENERATION_ANNOTATION]: value } } }, "kubectl");
    await setFence("999999");
    const wedged = await reconcileWithRuntime(web, { metadata: { name: "w" }, spec: { image: "b" } }, { kube });
    const condition = ready(wedged.object);
    assert.equal(wedged.outcome.result, "permanent", wedged.outcome.detail);
    assert.deepEqual([condition?.status, condition?.reason], ["False", "FenceAhead"]);
    assert.match(condition?.message ?? "", /carries crdfn\.io\/parent-generation 999999, above this Web's generation 2: .*crdfn repair web\/w -n default/);
    assert.equal((wedged.object?.status as { observedGeneration?: number }).observedGeneration, wedged.object?.metadata.generation);
    assert.equal(wedged.events.length > 0, true, "an Event says so");
    await setFence("2");
    const mended = await reconcileWithRuntime(web, { metadata: { name: "w" }, spec: { image: "b" } }, { kube });
    assert.deepEqual([mended.outcome.result, ready(mended.object)?.status], ["success", "True"]);
    assert.deepEqual((await kube.get(childRef))?.data, { image: "b" });
  });
});
