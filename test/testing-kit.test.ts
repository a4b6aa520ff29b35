// crdfn/testing against production: the same objects given to the testing kit (reconcileWithRuntime
// over its in-memory API server) and to the runtime on a real kube-apiserver, writing as the
// function's generated identity under its generated admission policy, get the same verdict: the
// children and status, or Ready=False with the same reason and words.
import { signedForTest } from "./support/event-key.ts";
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { Operator } from "../core/operator.ts";
import { PARENT_UID_LABEL } from "../core/event.ts";
import { reconcileWithRuntime } from "../functions/testing/index.ts";
import { handleMessage, type Runtime } from "../functions/runtime/runtime.ts";
import { announcedEvent, crApi, runtimeFor, startEnv, type Env } from "./support/functions-environment.ts";
import { cases, foreignSecret, verdictOfRun, widget } from "./support/kit-parity.ts";

const op = widget as Operator<unknown>;

describe("the testing kit gives the verdicts of the runtime on a real API server", { timeout: 180_000 }, () => {
  let env: Env;
  let runtime: Runtime;

  before(async () => {
    env = await startEnv([op], { file: import.meta.filename });
    runtime = runtimeFor(env, op);
  });
  after(async () => {
    await env?.cluster.stop();
  });

  /** The runtime's verdict on a real API server, one reconcile of the object as the bridge announces it. */
  async function inProduction(name: string, spec: Record<string, unknown>, foreign: boolean) {
    const crs = crApi(env, op);
    if (foreign) {
      const { metadata, stringData } = foreignSecret(name);
      await env.core.createNamespacedSecret({ namespace: env.cluster.namespace, body: { metadata: { name: metadata.name }, stringData } });
    }
    const created = await crs.create(name, spec);
    const outcome = await handleMessage(runtime, { id: `m-${name}`, body: JSON.stringify(signedForTest(await announcedEvent(env, op, created))) });
    const object = await crs.get(name);
    const uid = object?.metadata?.uid ?? "";
    // A list's items carry no kind: it is the list's.
    const controlled = async (plural: string, kind: string) =>
      (await env.api.list({ group: "", version: "v1", plural, namespace: env.cluster.namespace }, `${PARENT_UID_LABEL}=${uid}`))
        .filter((c) =>
          ((c.metadata.ownerReferences as Array<{ uid?: string; controller?: boolean }> | undefined) ?? []).some((r) => r.controller && r.uid === uid),
        )
        .map((c) => ({ ...c, kind }));
    const children = [...(await controlled("configmaps", "ConfigMap")), ...(await controlled("secrets", "Secret"))];
    return { outcome: outcome.result, verdict: verdictOfRun(object, children) };
  }

  for (const [i, [what, c]] of Object.entries(cases).entries()) {
    it(what, async () => {
      const name = `w${i}`;
      const foreign = "foreignSecret" in c;
      const real = await inProduction(name, c.spec, foreign);
      const kit = await reconcileWithRuntime(widget, { metadata: { name }, spec: c.spec }, { objects: foreign ? [foreignSecret(name)] : [] });
      assert.deepEqual(verdictOfRun(kit.object, kit.children), real.verdict);
      assert.equal(kit.outcome.result, real.outcome);
    });
  }
});
