// Credentials against the real API server, with a ServiceAccount that holds exactly the rules
// generated for the operator: a bearer token from a file, from the environment, and the
// in-cluster ServiceAccount mount. The reconcile must work with nothing more.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, copyFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { clusterRoleOf } from "../deploy/rbac.ts";
import type { Operator } from "../core/operator.ts";
import { apiAccess } from "./support/api-access.ts";
import cronTab, { REGISTRY } from "../examples/crontab/operator.ts";
import { loadConfig } from "../functions/runtime/config.ts";
import { createKubeApi } from "../functions/runtime/kube-api-http.ts";
import type { KubeApi, KubeObject } from "../functions/runtime/kube-api.ts";
import { handleMessage, createRuntime } from "../functions/runtime/runtime.ts";
import { CLUSTER, crApi, keyEventOf, ready, startEnv, type Env } from "./support/functions-environment.ts";
import { signedForTest, testRuntimeKeys } from "./support/event-key.ts";

const op = cronTab as Operator<unknown>;
const SA = "crontab-functions";

describe("credentials with a least-privilege ServiceAccount", { timeout: 120_000 }, () => {
  let env: Env;
  let dir: string;
  let token: string;
  const clock = () => new Date();

  before(async () => {
    env = await startEnv([op], { file: import.meta.filename });
    dir = mkdtempSync(join(tmpdir(), "crdfn-cred-"));
    const rbac = { group: "rbac.authorization.k8s.io", version: "v1" };
    const role = clusterRoleOf(op) as unknown as KubeObject;
    await env.api.apply({ ...rbac, plural: "clusterroles", name: role.metadata.name }, role, "crdfn-test");
    await env.api.apply(
      { ...rbac, plural: "clusterrolebindings", name: SA },
      {
        apiVersion: "rbac.authorization.k8s.io/v1",
        kind: "ClusterRoleBinding",
        metadata: { name: SA },
        roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: role.metadata.name },
        subjects: [{ kind: "ServiceAccount", name: SA, namespace: env.cluster.namespace }],
      },
      "crdfn-test",
    );
    await env.core.createNamespacedServiceAccount({ namespace: env.cluster.namespace, body: { metadata: { name: SA } } });
    const request = await env.core.createNamespacedServiceAccountToken({
      name: SA,
      namespace: env.cluster.namespace,
      body: { spec: { audiences: [], expirationSeconds: 3600 } },
    });
    token = request.status?.token ?? "";
    assert.ok(token.length > 0);
  });
  after(async () => {
    rmSync(dir, { recursive: true, force: true });
    await env?.cluster.stop();
  });

  /** Create → finalizer, children, status; delete → finalizer cleanup; all with `api` alone. */
  async function lifecycle(api: KubeApi, name: string): Promise<void> {
    const runtime = createRuntime(op, { api, logger: pino({ level: "silent" }), clock, ...testRuntimeKeys(op, CLUSTER) });
    const crs = crApi(env, op);
    const cr = await crs.create(name, { cronSpec: "0 1 * * *", image: "busybox:1.36" });
    const created = await handleMessage(runtime, { id: `${name}-1`, body: JSON.stringify(signedForTest(keyEventOf(op, cr))) });
    assert.equal(created.result, "success", created.detail);
    assert.equal(ready(await crs.get(name))?.status, "True");
    await crs.delete(name);
    // The bridge announces the deletion with the version that carries it: a read "not older
    // than" the creation's version may be served by a watch cache that has not seen it yet.
    const deleting = await crs.get(name);
    assert.ok(deleting?.metadata?.deletionTimestamp, "the finalizer holds the object");
    const finalized = await handleMessage(runtime, { id: `${name}-2`, body: JSON.stringify(signedForTest(keyEventOf(op, deleting))) });
    assert.equal(finalized.result, "success", finalized.detail);
    assert.equal(await crs.get(name), undefined);
    const registry = await env.core.readNamespacedConfigMap({ name: REGISTRY, namespace: env.cluster.namespace });
    assert.equal(registry.data?.[name], undefined);
  }

  it("a bearer token from a file", { timeout: 30_000 }, async () => {
    const file = join(dir, "token");
    writeFileSync(file, `${token}\n`);
    const config = loadConfig({
      CRDFN_KUBE_AUTH: "token",
      CRDFN_KUBE_SERVER: env.cluster.server,
      CRDFN_KUBE_CA_FILE: env.cluster.caPath,
      CRDFN_KUBE_TOKEN_FILE: file,
    });
    const api = createKubeApi(await apiAccess(config, { clock }));
    await lifecycle(api, "by-file");
    // Least privilege: nothing beyond the generated rules.
    await assert.rejects(api.get({ group: "", version: "v1", plural: "secrets", namespace: env.cluster.namespace }), (e: { code?: number }) => e.code === 403);
  });

  it("a bearer token from the environment", { timeout: 30_000 }, async () => {
    const config = loadConfig({
      CRDFN_KUBE_AUTH: "token",
      CRDFN_KUBE_SERVER: env.cluster.server,
      CRDFN_KUBE_CA_FILE: env.cluster.caPath,
      CRDFN_KUBE_TOKEN: token,
    });
    await lifecycle(createKubeApi(await apiAccess(config, { clock })), "by-env");
  });

  it("the in-cluster ServiceAccount mount", { timeout: 30_000 }, async () => {
    const mount = join(dir, "var/run/secrets/kubernetes.io/serviceaccount");
    mkdirSync(mount, { recursive: true });
    writeFileSync(join(mount, "token"), token);
    writeFileSync(join(mount, "namespace"), env.cluster.namespace);
    copyFileSync(env.cluster.caPath, join(mount, "ca.crt"));
    const server = new URL(env.cluster.server);
    Object.assign(process.env, { KUBERNETES_SERVICE_HOST: server.hostname, KUBERNETES_SERVICE_PORT: server.port });
    const config = loadConfig({ CRDFN_KUBE_AUTH: "in-cluster" });
    await lifecycle(createKubeApi(await apiAccess(config, { clock, serviceAccountRoot: dir })), "in-cluster");
  });
});
