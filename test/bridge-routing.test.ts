// One bridge, a queue per operator: each watched resource's events reach the queue its
// configuration names (as serverless.yml gives every operator's function its own queue),
// and resources without one use CRDFN_QUEUE_URL.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { CreateQueueCommand, type SQSClient } from "@aws-sdk/client-sqs";
import { startBridge, type RunningBridge } from "../bridge/bridge.ts";
import { eventually } from "./support/eventually.ts";
import { bridgeConfig, startBridgeEnvironment, testLogger } from "./support/bridge-environment.ts";
import type { TestCluster } from "./support/test-cluster.ts";
import { crontab, CRONTAB_RESOURCE, crontabPath } from "./support/crontabs.ts";
import { kube, ok } from "./support/kube-requests.ts";
import { QueueReader } from "./support/queue-reader.ts";
import { TEST_EVENT_KEY } from "./support/event-key.ts";

describe("bridge: a queue per resource", { timeout: 120_000 }, () => {
  let env: Awaited<ReturnType<typeof startBridgeEnvironment>>;
  let ns: string;
  let cluster: TestCluster;
  let sqs: SQSClient;
  let bridge: RunningBridge;
  let crontabQueue: string;

  before(async () => {
    env = await startBridgeEnvironment({ file: import.meta.filename });
    ({ cluster, sqs } = env);
    ns = cluster.namespace;
    crontabQueue = (await sqs.send(new CreateQueueCommand({ QueueName: `${ns}-crontab-operator.fifo`, Attributes: { FifoQueue: "true" } }))).QueueUrl!;
    const config = bridgeConfig(cluster, { CRDFN_RESOURCES: `${CRONTAB_RESOURCE}@${crontabQueue},v1/configmaps`, CRDFN_NAMESPACES: ns });
    bridge = startBridge(config, { eventKey: TEST_EVENT_KEY, kubeConfig: cluster.kubeConfig, sqs, logger: testLogger() });
    await bridge.ready;
  });
  after(async () => {
    await bridge?.stop(1000);
    await env?.stop();
  });

  it("sends each resource's events to its own queue, the rest to the default one", async () => {
    await ok(kube(cluster.kubeConfig, "POST", crontabPath(ns), crontab("routed")), "crontab");
    await ok(kube(cluster.kubeConfig, "POST", `/api/v1/namespaces/${ns}/configmaps`, { metadata: { name: "unrouted" }, data: { k: "v" } }), "configmap");
    const own = new QueueReader(sqs, crontabQueue);
    const shared = new QueueReader(sqs, cluster.sqs.queues.fifo);
    await eventually(async () => {
      await own.drain();
      await shared.drain();
      assert.ok(
        own.all.some((r) => r.event.kind === "CronTab" && r.event.name === "routed"),
        "CronTab event on its own queue",
      );
      assert.ok(
        shared.all.some((r) => r.event.plural === "configmaps" && r.event.name === "unrouted"),
        "ConfigMap event on the default queue",
      );
    });
    assert.deepEqual([...new Set(own.all.map((r) => r.event.plural))], ["crontabs"]);
    assert.ok(shared.all.every((r) => r.event.plural === "configmaps"));
  });
});
