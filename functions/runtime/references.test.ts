// Referenced objects through the whole runtime path (crdfn/testing's in-memory API server): read
// by name into ctx.references, recorded in status.references with the version read.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { z } from "zod";
import { TemporaryError } from "../../core/errors.ts";
import { defineOperator, type ReadKind } from "../../core/operator.ts";
import { reconcileWithRuntime } from "../testing/index.ts";
import type { KubeObject } from "./kube-api.ts";

type Spec = { secretRef?: string | undefined };
const spec = z.object({ secretRef: z.string().optional() });
interface Secret {
  data?: Record<string, string>;
  metadata: { resourceVersion: string };
}

function reporter(read: ReadKind<Spec> = { group: "", version: "v1", kind: "Secret", field: "spec.secretRef" }) {
  return defineOperator<Spec>({
    resource: { group: "example.com", version: "v1", plural: "reports", kind: "Report" },
    spec,
    reads: [read],
    reconcile(report, ctx) {
      const ref = report.spec.secretRef;
      if (ref === undefined) return { status: { keys: [] } };
      const secret = ctx.references.of<Secret>("Secret")[ref];
      if (!secret) throw new TemporaryError(`Secret ${ref} does not exist yet`, 60, "SecretMissing");
      return { status: { keys: Object.keys(secret.data ?? {}).sort() } };
    },
  });
}
const secret = (name: string, data: Record<string, string>, namespace = "default") => ({
  apiVersion: "v1",
  kind: "Secret",
  metadata: { name, namespace },
  data,
});
const statusOf = (o: KubeObject | undefined) =>
  o?.status as { keys?: string[]; references?: unknown[]; conditions?: Array<{ type: string; reason: string }> } | undefined;

describe("referenced objects (runtime)", () => {
  it("reads the Secret the spec names into ctx.references and records it with the version read", async () => {
    const run = await reconcileWithRuntime(
      reporter(),
      { metadata: { name: "r" }, spec: { secretRef: "db" } },
      { objects: [secret("db", { user: "dXNlcg==", password: "cA==" })] },
    );
    assert.equal(run.outcome.result, "success");
    assert.deepEqual(statusOf(run.object)?.keys, ["password", "user"]);
    const stored = await run.kube.get({ group: "", version: "v1", plural: "secrets", namespace: "default", name: "db" });
    assert.deepEqual(statusOf(run.object)?.references, [
      { apiVersion: "v1", kind: "Secret", namespace: "default", name: "db", resourceVersion: stored?.metadata.resourceVersion },
    ]);
  });

  it("a missing Secret is absent, not an error; the failure records it was read absent, so its creation wakes the object", async () => {
    const run = await reconcileWithRuntime(reporter(), { metadata: { name: "r" }, spec: { secretRef: "later" } });
    assert.equal(run.outcome.result, "retry-later");
    assert.equal(statusOf(run.object)?.conditions?.find((c) => c.type === "Ready")?.reason, "SecretMissing");
    assert.deepEqual(statusOf(run.object)?.references, [{ apiVersion: "v1", kind: "Secret", namespace: "default", name: "later" }]);
    const again = await reconcileWithRuntime(
      reporter(),
      { metadata: { name: "r" }, spec: { secretRef: "later" } },
      { kube: run.kube, objects: [secret("later", { k: "dg==" })] },
    );
    assert.equal(again.outcome.result, "success");
    assert.equal((statusOf(again.object)?.references?.[0] as { resourceVersion?: string }).resourceVersion !== undefined, true);
  });

  it("an object that references nothing records nothing", async () => {
    const run = await reconcileWithRuntime(reporter(), { metadata: { name: "r" }, spec: {} });
    assert.equal(run.outcome.result, "success");
    assert.equal(statusOf(run.object)?.references, undefined);
  });

  it("a name function may name several; names come back in a stable order, each once", async () => {
    const op = reporter({ group: "", version: "v1", kind: "Secret", name: () => ["b", "a", "b", ""] });
    const run = await reconcileWithRuntime(op, { metadata: { name: "r" }, spec: {} }, { objects: [secret("a", {}), secret("b", {})] });
    assert.deepEqual(
      (statusOf(run.object)?.references as Array<{ name: string }>).map((r) => r.name),
      ["a", "b"],
    );
  });

  it("refuses a reference into another namespace (ReferenceInOtherNamespace) and a name that is no name (InvalidReference)", async () => {
    const elsewhere = await reconcileWithRuntime(
      reporter({ group: "", version: "v1", kind: "Secret", name: () => ({ namespace: "kube-system", name: "admin" }) }),
      { metadata: { name: "r" }, spec: {} },
    );
    assert.equal(elsewhere.outcome.result, "permanent");
    assert.equal(statusOf(elsewhere.object)?.conditions?.find((c) => c.type === "Ready")?.reason, "ReferenceInOtherNamespace");
    const bad = await reconcileWithRuntime(reporter(), { metadata: { name: "r" }, spec: { secretRef: "Not/A/Name" } });
    assert.equal(statusOf(bad.object)?.conditions?.find((c) => c.type === "Ready")?.reason, "InvalidReference");
  });

  it("ctx.references.of a kind not declared in reads throws: ReconcileError naming it", async () => {
    const op = defineOperator({
      resource: { group: "example.com", version: "v1", plural: "reports", kind: "Report" },
      spec,
      reconcile: (_r, ctx) => ({ status: { n: Object.keys(ctx.references.of("ConfigMap")).length } }),
    });
    const run = await reconcileWithRuntime(op, { metadata: { name: "r" }, spec: {} });
    assert.match(JSON.stringify(run.object?.status), /ctx.references.of\(\\"ConfigMap\\"\): ConfigMap is not declared in reads/);
  });
});
