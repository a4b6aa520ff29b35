// A message's carried body may be older than the object: what the runtime writes from such a view
// never steps back (core/fence.ts). Through the in-memory API server, as the operator's function
// meets it (the fence enforced as the generated admission policy enforces it).
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { pino } from "pino";
import { z } from "zod";
import { PARENT_GENERATION_ANNOTATION, type KeyEvent } from "../../core/event.ts";
import { defineOperator, type Operator } from "../../core/operator.ts";
import { reconcileWithRuntime, type FakeKube } from "../testing/index.ts";
import { asTheFunction, childKeys } from "../testing/run.ts";
import type { KubeObject } from "./kube-api.ts";
import { handleMessage, createRuntime } from "./runtime.ts";
import { signedForTest, testRuntimeKeys } from "../../test/support/event-key.ts";

type Spec = { value: number; note?: string | undefined };
/** The child holds the value only: a change of `note` leaves it as it is (its apply is skipped). */
const valued = defineOperator<Spec>({
  resource: { group: "example.com", version: "v1", plural: "valueds", kind: "Valued" },
  spec: z.object({ value: z.number().int(), note: z.string().optional() }),
  owns: [{ group: "", version: "v1", kind: "ConfigMap" }],
  reconcile: (o) => ({
    children: [{ apiVersion: "v1", kind: "ConfigMap", metadata: { name: `${o.metadata.name}-out` }, data: { value: String(o.spec.value) } }],
  }),
}) as Operator<unknown>;

const parentRef = { group: "example.com", version: "v1", plural: "valueds", namespace: "default", name: "v" };
const childRef = { group: "", version: "v1", plural: "configmaps", namespace: "default", name: "v-out" };
const valueOf = async (kube: FakeKube) => ((await kube.get(childRef))?.data as Record<string, string> | undefined)?.value;
const fenceOfChild = async (kube: FakeKube) =>
  ((await kube.get(childRef))?.metadata.annotations as Record<string, string> | undefined)?.[PARENT_GENERATION_ANNOTATION];

/** The event the bridge published when it saw `body`, delivered now: its children's keys as the bridge's index holds them now. */
function eventOf(kube: FakeKube, body: KubeObject): KeyEvent {
  return {
    v: 2,
    cluster: "test",
    group: "example.com",
    version: "v1",
    plural: "valueds",
    kind: "Valued",
    namespace: "default",
    name: "v",
    uid: body.metadata.uid ?? "",
    resourceVersion: body.metadata.resourceVersion ?? "",
    generation: body.metadata.generation ?? 0,
    type: "MODIFIED",
    reason: "watch",
    observedAt: new Date().toISOString(),
    object: body as unknown as NonNullable<KeyEvent["object"]>,
    children: childKeys(kube, valued, body),
  };
}

/** Hands the runtime one message, as the function's identity; `fenced: false` plays an API server without the policy's fence. */
async function deliver(kube: FakeKube, event: KeyEvent, o: { receiveCount?: number; fenced?: boolean } = {}) {
  const api = o.fenced === false ? kube.as(() => undefined) : asTheFunction(kube, valued);
  const runtime = createRuntime(valued, {
    api,
    logger: pino({ level: "silent" }),
    clock: () => new Date("2026-01-01T00:00:00Z"),
    ...testRuntimeKeys(valued, "test"),
  });
  return handleMessage(runtime, { id: `m-${event.resourceVersion}`, body: JSON.stringify(signedForTest(event)), receiveCount: o.receiveCount ?? 1 });
}

/** Generation `value` of the object stored, reconciled; returns the body the bridge saw at each generation. */
async function reconciledUpTo(specs: Spec[]): Promise<{ kube: FakeKube; bodies: KubeObject[] }> {
  const first = await reconcileWithRuntime(valued, { metadata: { name: "v" }, spec: specs[0]! });
  const bodies = [(await first.kube.get(parentRef))!];
  for (const spec of specs.slice(1)) {
    await reconcileWithRuntime(valued, { metadata: { name: "v" }, spec }, { kube: first.kube });
    bodies.push((await first.kube.get(parentRef))!);
  }
  return { kube: first.kube, bodies };
}

describe("stale views", () => {
  it("fences every child with its parent's generation, outside the applied hash: a change that leaves the child alone writes nothing", async () => {
    const { kube } = await reconciledUpTo([{ value: 1 }]);
    assert.equal(await fenceOfChild(kube), "1");
    const before = (await kube.get(childRef))?.metadata.resourceVersion;
    const again = await reconcileWithRuntime(valued, { metadata: { name: "v" }, spec: { value: 1, note: "changed" } }, { kube });
    assert.equal(again.object?.metadata.generation, 2);
    assert.equal((await kube.get(childRef))?.metadata.resourceVersion, before, "skipped: same content, the fence left at 1");
  });

  it("a stale body's child write is refused by the fence, re-read and recomputed: the child does not step back (and without the fence it would)", async () => {
    const { kube, bodies } = await reconciledUpTo([{ value: 1 }, { value: 2 }]);
    const stale = eventOf(kube, bodies[0]!);
    const before = (await kube.get(childRef))?.metadata.resourceVersion;
    const outcome = await deliver(kube, stale);
    assert.equal(outcome.result, "success");
    assert.equal(await valueOf(kube), "2");
    assert.equal((await kube.get(childRef))?.metadata.resourceVersion, before, "refused, then nothing left to write");

    const unfenced = await reconciledUpTo([{ value: 1 }, { value: 2 }]);
    await deliver(unfenced.kube, eventOf(unfenced.kube, unfenced.bodies[0]!), { fenced: false });
    assert.equal(await valueOf(unfenced.kube), "1", "the fault the fence closes: the stale body's child applied");
  });

  it("behind a view newer than its message, an unchanged child's fence is raised, so a stale message queued behind cannot slip under it", async () => {
    // Generation 1 applied (value 1, fence 1); then 2 (value 2) and 3 (value 1 again) are stored, not yet reconciled.
    const { kube, bodies } = await reconciledUpTo([{ value: 1, note: "a" }]);
    await kube.mergePatch(parentRef, { spec: { value: 2 } });
    const second = (await kube.get(parentRef))!;
    await kube.mergePatch(parentRef, { spec: { value: 1, note: "b" } });
    // Generation 1's message, delivered again, reads generation 3: its child is as wanted (value 1), skipped but for its fence.
    await deliver(kube, eventOf(kube, bodies[0]!), { receiveCount: 2 });
    assert.equal(await valueOf(kube), "1");
    assert.equal(await fenceOfChild(kube), "3", "raised to the generation acted on");
    // Generation 2's message, queued behind with its older body: refused, re-read, nothing to do.
    const outcome = await deliver(kube, eventOf(kube, second));
    assert.equal(outcome.result, "success");
    assert.equal(await valueOf(kube), "1", "generation 2's value never written after generation 3's");
  });

  it("a spec change with its body in the event still costs two requests: the child's apply and the status write", async () => {
    const { kube } = await reconciledUpTo([{ value: 1 }]);
    const changed = await reconcileWithRuntime(valued, { metadata: { name: "v" }, spec: { value: 2 } }, { kube });
    assert.equal(changed.outcome.apiCalls, 2);
    assert.equal(await fenceOfChild(kube), "2");
  });

  it("acting on the message's own generation raises nothing: a steady reconcile still writes nothing", async () => {
    const { kube, bodies } = await reconciledUpTo([{ value: 1 }]);
    const outcome = await deliver(kube, eventOf(kube, bodies[0]!));
    assert.equal(outcome.apiCalls, 0);
  });

  it("prunes only from a current view: a stale body that no longer wants a child leaves it to the newer message behind", async () => {
    const op = defineOperator<{ names: string[] }>({
      resource: { group: "example.com", version: "v1", plural: "valueds", kind: "Valued" },
      spec: z.object({ names: z.array(z.string()) }),
      owns: [{ group: "", version: "v1", kind: "ConfigMap" }],
      reconcile: (o) => ({ children: o.spec.names.map((n) => ({ apiVersion: "v1", kind: "ConfigMap", metadata: { name: n }, data: {} })) }),
    }) as Operator<unknown>;
    const first = await reconcileWithRuntime(op, { metadata: { name: "v" }, spec: { names: ["a"] } });
    const stale = (await first.kube.get(parentRef))!;
    await reconcileWithRuntime(op, { metadata: { name: "v" }, spec: { names: ["a", "b"] } }, { kube: first.kube });
    const b = { group: "", version: "v1", plural: "configmaps", namespace: "default", name: "b" };
    const uid = (await first.kube.get(b))?.metadata.uid;
    // Generation 1's body, with the children's keys of now (a and b): from that view, b is not wanted.
    const runtime = createRuntime(op, {
      api: asTheFunction(first.kube, op),
      logger: pino({ level: "silent" }),
      clock: () => new Date(),
      ...testRuntimeKeys(op, "test"),
    });
    const event = { ...eventOf(first.kube, stale), children: childKeys(first.kube, op, stale) };
    await handleMessage(runtime, { id: "stale", body: JSON.stringify(signedForTest(event)), receiveCount: 1 });
    assert.equal((await first.kube.get(b))?.metadata.uid, uid, "b, which generation 2 wants, was never deleted (not deleted and made again)");
  });
});
