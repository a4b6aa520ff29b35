// Outage verdicts are narrow: a validating webhook that answers 500 for one kind is that kind's
// objects' failure, shown on them (Ready=False with the API server's reason, the attempt count and
// the next retry), and does not open the cluster's circuit: another operator's kind, reconciled by
// the same function host, keeps converging meanwhile, and nothing is dead-lettered.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { createServer, type Server } from "node:https";
import type { AddressInfo } from "node:net";
import { dirname, join } from "node:path";
import { z } from "zod";
import { defineOperator, type Operator } from "../core/operator.ts";
import { nextReconcileOf } from "../core/schedule.ts";
import type { RunningBridge } from "../bridge/bridge.ts";
import type { Poller } from "../functions/adapters/poller.ts";
import { runtimeByResource } from "../functions/runtime/runtime.ts";
import { pino } from "pino";
import { crApi, pollerFor, ready, receiveAll, runtimeFor, startEnv, startTestBridge, waitFor, type Env } from "./support/functions-environment.ts";

const operatorOwning = (plural: string, kind: string, child: { apiVersion: string; kind: string; group: string; body: Record<string, unknown> }) =>
  defineOperator({
    resource: { group: "test.crdfn.dev", version: "v1", plural, kind },
    spec: z.object({ value: z.string() }),
    owns: [{ group: child.group, version: "v1", kind: child.kind }],
    reconcile: (o) => ({
      children: [
        {
          apiVersion: child.apiVersion,
          kind: child.kind,
          metadata: { name: `${o.metadata.name}-child` },
          ...child.body,
          ...(child.kind === "ConfigMap" ? { data: { value: o.spec.value } } : { stringData: { value: o.spec.value } }),
        },
      ],
      status: { value: o.spec.value },
    }),
  }) as Operator<unknown>;
const maps = operatorOwning("mapholders", "MapHolder", { apiVersion: "v1", kind: "ConfigMap", group: "", body: {} });
const secrets = operatorOwning("secretholders", "SecretHolder", { apiVersion: "v1", kind: "Secret", group: "", body: {} });

describe("a failing webhook for one kind", { timeout: 240_000 }, () => {
  let env: Env;
  let bridge: RunningBridge;
  let poller: Poller;
  let webhook: Server;
  let calls = 0;

  before(async () => {
    env = await startEnv([maps, secrets], { file: import.meta.filename });
    // A webhook that fails every ConfigMap write, served with the API server's own certificate
    // (its CA is the caBundle), on loopback.
    const pki = dirname(env.cluster.caPath);
    webhook = createServer({ cert: readFileSync(join(pki, "apiserver.crt")), key: readFileSync(join(pki, "apiserver.key")) }, (req, res) => {
      calls++;
      req.resume();
      res.writeHead(500).end("webhook broken");
    });
    await new Promise<void>((r) => webhook.listen(0, "127.0.0.1", r));
    const port = (webhook.address() as AddressInfo).port;
    const config = {
      apiVersion: "admissionregistration.k8s.io/v1",
      kind: "ValidatingWebhookConfiguration",
      metadata: { name: "broken-configmaps" },
      webhooks: [
        {
          name: "configmaps.broken.test.crdfn.dev",
          clientConfig: { url: `https://127.0.0.1:${port}/validate`, caBundle: Buffer.from(readFileSync(env.cluster.caPath)).toString("base64") },
          rules: [{ apiGroups: [""], apiVersions: ["v1"], resources: ["configmaps"], operations: ["CREATE", "UPDATE"], scope: "Namespaced" }],
          namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": env.cluster.namespace } },
          failurePolicy: "Fail",
          sideEffects: "None",
          admissionReviewVersions: ["v1"],
          timeoutSeconds: 5,
        },
      ],
    };
    await env.api.apply(
      { group: "admissionregistration.k8s.io", version: "v1", plural: "validatingwebhookconfigurations", name: "broken-configmaps" },
      config,
      "crdfn-test",
    );
    bridge = await startTestBridge(env, "test.crdfn.dev/v1/mapholders>v1/configmaps, test.crdfn.dev/v1/secretholders>v1/secrets");
    const runtime = runtimeByResource(
      [maps, secrets].map((operator) => runtimeFor(env, operator)),
      pino({ level: "silent" }),
    );
    poller = pollerFor(env, runtime);
  });
  after(async () => {
    await poller?.stop();
    await bridge?.stop(1000);
    webhook?.close();
    await env?.cluster.stop();
  });

  it(
    "shows on the failing kind's objects and retries them with backoff, while the other kind converges and nothing is dead-lettered",
    { timeout: 200_000 },
    async () => {
      await crApi(env, maps).create("m1", { value: "a" });
      await waitFor(
        "the webhook's refusal shows on the object, with its next attempt",
        async () => {
          const cr = await crApi(env, maps).get("m1");
          return ready(cr)?.status === "False" && (nextReconcileOf(cr?.status)?.attempts ?? 0) >= 2;
        },
        60_000,
      );
      const failing = await crApi(env, maps).get("m1");
      console.log(
        `# MapHolder m1: Ready=False ${ready(failing)?.reason}: ${ready(failing)?.message?.slice(0, 120)}; attempts ${nextReconcileOf(failing?.status)?.attempts}`,
      );
      assert.equal(ready(failing)?.reason, "InternalError");
      assert.match(ready(failing)?.message ?? "", /webhook/);
      assert.ok(calls >= 2, "the webhook was called for each attempt");

      // Meanwhile the other kind goes on, changes included, through the same function host.
      for (let i = 0; i < 5; i++) {
        await crApi(env, secrets).create(`s${i}`, { value: "x" });
      }
      for (let i = 0; i < 5; i++)
        await waitFor(`SecretHolder s${i} Ready`, async () => ready(await crApi(env, secrets).get(`s${i}`))?.status === "True", 30_000);
      await crApi(env, secrets).patchSpec("s0", { value: "y" });
      await waitFor("a change of the other kind converges", async () => (await crApi(env, secrets).get("s0"))?.status?.value === "y", 30_000);
      assert.ok(!env.logs.some((l) => typeof l.msg === "string" && l.msg.includes("circuit open")), "the circuit never opened");
      assert.deepEqual(await receiveAll(env, env.cluster.sqs.queues.fifoDlq), [], "nothing dead-lettered");
    },
  );
});
