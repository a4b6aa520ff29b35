// An operator that references a Secret, run as deployed (`crdfn dev`'s pipeline: the generated
// identities, the bridge and the function under their own tokens): a change, a deletion and a
// creation of the Secret reconcile the object that names it within 5 s (no retry, timer or resync
// could: the object's own retry is 5 minutes away and resync is off); the function's real token
// can `get` Secrets in its namespace and nothing more; the bridge is told Secrets' metadata only.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { CoreV1Api, CustomObjectsApi } from "@kubernetes/client-node";
import { pino } from "pino";
import { z } from "zod";
import { startPipeline, type Pipeline } from "../cli/local/pipeline.ts";
import { KubeHttp } from "../clients/kube-http.ts";
import { defineOperator, TemporaryError, type Operator } from "../core/index.ts";
import { testCluster, type TestCluster } from "./support/test-cluster.ts";
import { METADATA_LIST } from "../bridge/reflector.ts";
import { eventually } from "./support/eventually.ts";
import { adminKubectl, denied, serviceAccountKubectl, type Kubectl } from "./support/identities.ts";

const report = defineOperator({
  resource: { group: "refs.example.com", version: "v1", plural: "secretreports", kind: "SecretReport" },
  spec: z.object({ secretRef: z.string() }),
  reads: [{ group: "", version: "v1", kind: "Secret", field: "spec.secretRef" }],
  reconcile(r, ctx) {
    const secret = ctx.references.of<{ data?: Record<string, string> }>("Secret")[r.spec.secretRef];
    // Five minutes: only the Secret's own appearance can wake it sooner.
    if (!secret) throw new TemporaryError(`Secret ${r.spec.secretRef} does not exist`, 300, "SecretMissing");
    return {
      status: {
        keys: Object.keys(secret.data ?? {})
          .sort()
          .join(","),
      },
    };
  },
}) as Operator<unknown>;

const WITHIN_MS = 5000;

describe("an operator that references a Secret", { timeout: 300_000 }, () => {
  let cluster: TestCluster;
  /** This file's namespace (the one served), and another one of its own. */
  let NS = "";
  let ELSEWHERE = "";
  let pipeline: Pipeline;
  let admin: Kubectl;
  let core: CoreV1Api;
  let custom: CustomObjectsApi;

  before(async () => {
    cluster = await testCluster({ file: import.meta.filename, namespaces: ["elsewhere"] });
    NS = cluster.namespace;
    ELSEWHERE = cluster.ns("elsewhere");
    admin = adminKubectl(cluster);
    core = cluster.kubeConfig.makeApiClient(CoreV1Api);
    custom = cluster.kubeConfig.makeApiClient(CustomObjectsApi);
    pipeline = await startPipeline({
      cluster,
      queue: cluster.sqs,
      operators: [report],
      logger: pino({ level: "warn" }),
      functionLogLevel: "warn",
      identities: { namespaces: [NS] },
    });
  });
  after(async () => {
    await pipeline?.stop();
    await cluster?.stop();
  });

  const statusOf = async (name: string) => {
    const o = (await custom.getNamespacedCustomObject({ group: "refs.example.com", version: "v1", namespace: NS, plural: "secretreports", name })) as {
      status?: { keys?: string; conditions?: Array<{ type: string; reason: string }> };
    };
    return { keys: o.status?.keys, reason: o.status?.conditions?.find((c) => c.type === "Ready")?.reason };
  };
  const secret = (name: string, data: Record<string, string>) => ({
    metadata: { name, namespace: NS },
    data: Object.fromEntries(Object.entries(data).map(([k, v]) => [k, Buffer.from(v).toString("base64")])),
  });
  /** Waits for the report's status, failing after 5 s: the time a referenced change may take. */
  const within5s = (name: string, want: { keys?: string; reason: string }) =>
    eventually(async () => assert.deepEqual(await statusOf(name), want), { timeoutMs: WITHIN_MS, intervalMs: 100 });

  it("reconciles within 5 s of the Secret it names changing, going and appearing", async () => {
    await core.createNamespacedSecret({ namespace: NS, body: secret("db", { user: "app" }) });
    await custom.createNamespacedCustomObject({
      group: "refs.example.com",
      version: "v1",
      namespace: NS,
      plural: "secretreports",
      body: { apiVersion: "refs.example.com/v1", kind: "SecretReport", metadata: { name: "app" }, spec: { secretRef: "db" } },
    });
    await eventually(async () => assert.deepEqual(await statusOf("app"), { keys: "user", reason: "Reconciled" }), { timeoutMs: 60_000, intervalMs: 200 });

    await core.replaceNamespacedSecret({ name: "db", namespace: NS, body: secret("db", { user: "app", password: "s3cret" }) });
    await within5s("app", { keys: "password,user", reason: "Reconciled" });

    await core.deleteNamespacedSecret({ name: "db", namespace: NS });
    await within5s("app", { keys: "password,user", reason: "SecretMissing" });

    await core.createNamespacedSecret({ namespace: NS, body: secret("db", { token: "t" }) });
    await within5s("app", { keys: "token", reason: "Reconciled" });
  });

  it("an object created before the Secret it names is reconciled within 5 s of its creation", async () => {
    await custom.createNamespacedCustomObject({
      group: "refs.example.com",
      version: "v1",
      namespace: NS,
      plural: "secretreports",
      body: { apiVersion: "refs.example.com/v1", kind: "SecretReport", metadata: { name: "early" }, spec: { secretRef: "later" } },
    });
    await eventually(async () => assert.equal((await statusOf("early")).reason, "SecretMissing"), { timeoutMs: 60_000, intervalMs: 200 });
    await core.createNamespacedSecret({ namespace: NS, body: secret("later", { k: "v" }) });
    await within5s("early", { keys: "k", reason: "Reconciled" });
  });

  it("its function's real token may get Secrets in its namespace, and nothing more of them", async () => {
    await admin(["create", "secret", "generic", "other", "-n", ELSEWHERE, "--from-literal=k=v"]);
    const fn = await serviceAccountKubectl(cluster, admin, "crdfn-secretreport", "crdfn-functions");
    assert.match(await fn(["get", "secret", "db", "-n", NS, "-o", "name"]), /secret\/db/);
    for (const attack of [
      ["get", "secrets", "-n", NS], // list
      ["get", "secrets", "-n", NS, "--watch-only", "--request-timeout=2s"], // watch
      ["get", "secret", "other", "-n", ELSEWHERE], // another namespace
      ["get", "secret", "db", "-n", "kube-system"],
      ["create", "secret", "generic", "planted", "-n", NS, "--from-literal=k=v"],
      ["delete", "secret", "db", "-n", NS],
      ["get", "configmaps", "-n", NS],
    ]) {
      assert.equal((await denied(fn(attack))).by, "RBAC", attack.join(" "));
    }
  });

  it("the bridge's watch of a referenced kind asks for metadata only: no Secret's data reaches it", async () => {
    const http = new KubeHttp({ connection: cluster.kubeConfig });
    const list = (await http.getJson(`/api/v1/namespaces/${NS}/secrets`, {}, undefined, METADATA_LIST)) as {
      kind: string;
      items: Array<Record<string, unknown>>;
    };
    assert.equal(list.kind, "PartialObjectMetadataList");
    assert.ok(list.items.length >= 1);
    for (const item of list.items)
      assert.deepEqual(
        Object.keys(item).filter((k) => k !== "apiVersion" && k !== "kind"),
        ["metadata"],
      );
  });
});
