import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { finalizeContext, reconcileContext, testObject } from "crdfn/testing";
import cronTab, { cronTabSpec, REGISTRY } from "./operator.ts";

// The spec as a manifest writes it (replicas may be left to its default).
const object = (spec: { cronSpec: string; image: string; replicas?: number }) => testObject(cronTab, { metadata: { name: "nightly" }, spec });

describe("CronTab", () => {
  it("validates cronSpec with the documentation's pattern and replicas within 1–10", () => {
    assert.equal(cronTabSpec.safeParse({ cronSpec: "*/5 * * * *", image: "busybox" }).data?.replicas, 1);
    assert.equal(cronTabSpec.safeParse({ cronSpec: "every day", image: "busybox" }).success, false);
    assert.equal(cronTabSpec.safeParse({ cronSpec: "* * * * *", image: "busybox", replicas: 11 }).success, false);
  });

  it("wants an owned CronJob, a registry entry and status replicas", () => {
    const result = cronTab.reconcile(object({ cronSpec: "0 3 * * *", image: "busybox:1.36", replicas: 3 }), reconcileContext(cronTab));
    const job = result.children?.[0] as unknown as { kind: string; spec: { schedule: string; jobTemplate: { spec: { parallelism: number } } } };
    assert.equal(job.kind, "CronJob");
    assert.equal(job.spec.schedule, "0 3 * * *");
    assert.equal(job.spec.jobTemplate.spec.parallelism, 3);
    assert.deepEqual(result.shared?.[0], { apiVersion: "v1", kind: "ConfigMap", metadata: { name: REGISTRY }, data: { nightly: "0 3 * * *" } });
    assert.deepEqual(result.status, { replicas: 3 });
  });

  it("finalizes by withdrawing its registry entry", async () => {
    const released: unknown[] = [];
    const done = await cronTab.finalize?.(
      object({ cronSpec: "0 3 * * *", image: "x" }),
      finalizeContext({ release: (o) => Promise.resolve(void released.push(o)) }),
    );
    assert.deepEqual(done, { done: true });
    assert.deepEqual(released, [{ apiVersion: "v1", kind: "ConfigMap", name: REGISTRY, namespace: "default" }]);
  });
});
