// The ground everything stands on: a real kube-apiserver (with etcd and the controller
// manager) behaves as a cluster does. Uses the Kubernetes docs' CronTab CRD verbatim.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { execFileSync } from "node:child_process";
import { ApiException, KubernetesObjectApi, PatchStrategy, Watch, type KubernetesObject } from "@kubernetes/client-node";
import { startCluster, type LocalCluster } from "../emulator/cluster.ts";
import { eventually } from "./support/eventually.ts";

const crontabCrd = {
  apiVersion: "apiextensions.k8s.io/v1",
  kind: "CustomResourceDefinition",
  metadata: { name: "crontabs.stable.example.com" },
  spec: {
    group: "stable.example.com",
    scope: "Namespaced",
    names: { plural: "crontabs", singular: "crontab", kind: "CronTab", shortNames: ["ct"], categories: ["all"] },
    versions: [
      {
        name: "v1",
        served: true,
        storage: true,
        subresources: {
          status: {},
          scale: { specReplicasPath: ".spec.replicas", statusReplicasPath: ".status.replicas", labelSelectorPath: ".status.labelSelector" },
        },
        schema: {
          openAPIV3Schema: {
            type: "object",
            properties: {
              spec: {
                type: "object",
                properties: {
                  cronSpec: { type: "string", pattern: "^(\\d+|\\*)(/\\d+)?(\\s+(\\d+|\\*)(/\\d+)?){4}$" },
                  image: { type: "string" },
                  replicas: { type: "integer", minimum: 1, maximum: 10 },
                },
              },
              status: { type: "object", properties: { replicas: { type: "integer" }, labelSelector: { type: "string" } } },
            },
          },
        },
      },
    ],
  },
};

const crontab = (name: string, spec: Record<string, unknown>): KubernetesObject & { spec: Record<string, unknown> } => ({
  apiVersion: "stable.example.com/v1",
  kind: "CronTab",
  metadata: { name, namespace: "default" },
  spec,
});

describe("local control plane", { timeout: 180_000 }, () => {
  let cluster: LocalCluster;
  let api: KubernetesObjectApi;

  before(async () => {
    cluster = await startCluster({ queue: false, log: () => {} });
    api = KubernetesObjectApi.makeApiClient(cluster.kubeConfig);
  });
  after(async () => cluster?.stop());

  it("reports the pinned release on /version, to kubectl too", () => {
    const out = execFileSync(cluster.kubectl, ["--kubeconfig", cluster.kubeconfigPath, "version", "-o", "json"], { encoding: "utf8" });
    const server = (JSON.parse(out) as { serverVersion: { gitVersion: string } }).serverVersion;
    assert.match(server.gitVersion, /^v1\.34\.\d+$/);
  });

  it("registers the CronTab CRD and reports it Established", async () => {
    await api.create(crontabCrd);
    await eventually(async () => {
      const crd = (await api.read({ apiVersion: crontabCrd.apiVersion, kind: crontabCrd.kind, metadata: { name: crontabCrd.metadata.name } })) as {
        status?: { conditions?: { type: string; status: string }[] };
      };
      assert.ok(crd.status?.conditions?.some((c) => c.type === "Established" && c.status === "True"));
    });
    // Discovery must know the short name and category before kubectl can use them.
    await eventually(() => {
      const out = execFileSync(cluster.kubectl, ["--kubeconfig", cluster.kubeconfigPath, "api-resources", "--api-group=stable.example.com", "-o", "wide"], {
        encoding: "utf8",
      });
      assert.match(out, /crontabs\s+ct\s+stable\.example\.com\/v1\s+true\s+CronTab/);
      assert.match(out, /all/);
    });
  });

  it("creates a valid CronTab", async () => {
    const created = await api.create(crontab("valid", { cronSpec: "* * * * */5", image: "my-awesome-cron-image", replicas: 1 }));
    assert.ok(created.metadata?.uid);
  });

  it("rejects an invalid CronTab with the API server's own validation message", async () => {
    const err = await api.create(crontab("invalid", { cronSpec: "every minute", image: "x", replicas: 15 })).then(
      () => assert.fail("an invalid CronTab was accepted"),
      (e: unknown) => e,
    );
    assert.ok(err instanceof ApiException);
    assert.equal(err.code, 422);
    const message = String((JSON.parse(String(err.body)) as { message: string }).message);
    assert.match(message, /spec\.replicas: Invalid value: 15: spec\.replicas in body should be less than or equal to 10/);
    assert.match(message, /spec\.cronSpec: Invalid value: "every minute": spec\.cronSpec in body should match/);
  });

  it("delivers a change to a watch", async () => {
    const seen: string[] = [];
    const controller = await new Watch(cluster.kubeConfig).watch(
      "/apis/stable.example.com/v1/namespaces/default/crontabs",
      { fieldSelector: "metadata.name=watched" },
      (phase, obj: KubernetesObject & { spec?: { replicas?: number } }) => seen.push(`${phase}:${obj.spec?.replicas}`),
      () => {},
    );
    try {
      await api.create(crontab("watched", { cronSpec: "* * * * *", image: "x", replicas: 1 }));
      await api.patch(crontab("watched", { replicas: 2 }), undefined, undefined, undefined, undefined, PatchStrategy.MergePatch);
      await eventually(() => assert.deepEqual(seen, ["ADDED:1", "MODIFIED:2"]));
    } finally {
      controller.abort();
    }
  });

  it("garbage-collects an owned child after its owner is deleted", async () => {
    // A built-in owner: the garbage collector learns of a new CRD only at its next discovery sync
    // (every 30 s, not configurable), which a CronTab owner would wait out. Children of custom
    // resources are collected on the shared clusters (functions-crontab.test.ts).
    const owner = await api.create<KubernetesObject>({ apiVersion: "v1", kind: "ConfigMap", metadata: { name: "owner", namespace: "default" } });
    const child: KubernetesObject = {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: {
        name: "owned-child",
        namespace: "default",
        ownerReferences: [{ apiVersion: "v1", kind: "ConfigMap", name: "owner", uid: owner.metadata!.uid!, controller: true }],
      },
    };
    await api.create(child);
    await api.delete(owner);
    await eventually(
      async () => {
        const gone = await api.read(child as { metadata: { name: string; namespace: string } }).then(
          () => false,
          (e: unknown) => e instanceof ApiException && e.code === 404,
        );
        assert.ok(gone, "owned ConfigMap still exists");
      },
      { timeoutMs: 60_000 },
    );
  });

  it("answers 409 Conflict to a write with a stale resourceVersion", async () => {
    const first = await api.create(crontab("contended", { cronSpec: "* * * * *", image: "x", replicas: 1 }));
    const stale = first.metadata!.resourceVersion!;
    await api.patch(crontab("contended", { replicas: 2 }), undefined, undefined, undefined, undefined, PatchStrategy.MergePatch);
    const err = await api
      .patch(
        { ...crontab("contended", { replicas: 3 }), metadata: { name: "contended", namespace: "default", resourceVersion: stale } },
        undefined,
        undefined,
        undefined,
        undefined,
        PatchStrategy.MergePatch,
      )
      .then(
        () => assert.fail("a stale write succeeded"),
        (e: unknown) => e,
      );
    assert.ok(err instanceof ApiException);
    assert.equal(err.code, 409);
  });
});
