import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { z } from "zod";
import { defineOperator } from "../core/operator.ts";
import { envFile } from "./environment.ts";
import { reconcileLine } from "./dev-command.ts";
import { describeMessage } from "./admin/dlq.ts";
import { encodeKeyEvent, type KeyEvent } from "../core/event.ts";
import { signKeyEvent } from "../core/event-auth.ts";
import { watchedResourcesOf } from "../deploy/bridge.ts";
import type { ReconcileRecord } from "./local/pipeline.ts";

const record = (outcome: ReconcileRecord["outcome"]): ReconcileRecord => ({
  kind: "Greeting",
  namespace: "default",
  name: "hello-world",
  reason: "watch",
  outcome,
  latencyMs: 12.4,
});

describe("reconcile lines", () => {
  it("say what was reconciled, how it ended and how long it took", () => {
    assert.equal(reconcileLine(record({ result: "success", apiCalls: 3 })), "✔ Greeting hello-world reconciled in 12 ms (ns default, 3 API calls, watch)");
    assert.equal(
      reconcileLine(record({ result: "permanent", detail: "InvalidSpec: message: Required", apiCalls: 3 })),
      "✖ Greeting hello-world not reconciled: InvalidSpec: message: Required (12 ms; fix the object to retry)",
    );
    assert.match(
      reconcileLine(record({ result: "retry-later", delaySeconds: 30, detail: "requeue", apiCalls: 1 })),
      /not reconciled yet, again in 30s: requeue/,
    );
    const refused = { ...record({ result: "retry", detail: "the status write was refused", apiCalls: 2 }) };
    assert.match(reconcileLine({ ...refused, receiveCount: 2 }), /^! .*the queue redelivers the message \(receive 2 of 5\)/);
    assert.match(
      reconcileLine({ ...refused, receiveCount: 5 }),
      /^☠ .*receive 5 of 5: the message goes to the dead-letter queue/,
      "the last receive says so, not that it will be redelivered",
    );
  });
});

describe("bridge resources of operators", () => {
  it("names each operator's resource, the kinds it owns and its switches, for the deployed bridge and crdfn dev alike", () => {
    const op = (group: string, plural: string, kind: string, owns: { group: string; version: string; kind: string }[], extra = {}) =>
      defineOperator({ resource: { group, version: "v1", plural, kind }, spec: z.object({}), owns, reconcile: () => ({}), ...extra });
    assert.deepEqual(
      watchedResourcesOf(
        [
          op("example.com", "greetings", "Greeting", [{ group: "", version: "v1", kind: "ConfigMap" }]),
          op("stable.example.com", "crontabs", "CronTab", [{ group: "batch", version: "v1", kind: "CronJob" }], { resyncSeconds: 3600, eventBodies: false }),
        ],
        (o) => (o.resource.kind === "Greeting" ? { queueUrl: "https://q/greeting.fifo" } : {}),
      ),
      [
        {
          group: "example.com",
          version: "v1",
          plural: "greetings",
          owns: [{ group: "", version: "v1", plural: "configmaps" }],
          queueUrl: "https://q/greeting.fifo",
        },
        {
          group: "stable.example.com",
          version: "v1",
          plural: "crontabs",
          owns: [{ group: "batch", version: "v1", plural: "cronjobs" }],
          resyncSeconds: 3600,
          bodies: false,
        },
      ],
    );
  });
});

describe(".crdfn/env", () => {
  it("is KEY=value lines a shell can source", () => {
    assert.equal(envFile({ A: "1", KUBECONFIG: "/x/kubeconfig" }), "A=1\nKUBECONFIG=/x/kubeconfig\n");
  });
});

describe("dead-letter descriptions", () => {
  it("name the object of a key event and flag a malformed body", () => {
    const now = Date.parse("2026-11-21T12:00:10Z");
    const body = JSON.stringify({
      v: 1,
      cluster: "prod",
      group: "example.com",
      version: "v1",
      plural: "greetings",
      kind: "Greeting",
      namespace: "default",
      name: "hello",
      uid: "u1",
      resourceVersion: "7",
      generation: 2,
      type: "MODIFIED",
      observedAt: "2026-11-21T12:00:00Z",
    });
    const sent = String(Date.parse("2026-11-21T12:00:00Z"));
    assert.equal(
      describeMessage({ MessageId: "m1", Body: body, Attributes: { SentTimestamp: sent } }, now),
      "m1  Greeting default/hello  MODIFIED  cluster prod  10s old  unsigned v1 event: a redrive is refused, run crdfn resync greetings hello -n default",
    );
    const signed = encodeKeyEvent(signKeyEvent(JSON.parse(body) as KeyEvent, { kid: "k1", secret: Buffer.alloc(32, 1) }));
    assert.equal(
      describeMessage({ MessageId: "m3", Body: signed, Attributes: { SentTimestamp: sent } }, now),
      "m3  Greeting default/hello  MODIFIED  cluster prod  10s old",
    );
    assert.match(describeMessage({ MessageId: "m2", Body: "{oops", Attributes: { SentTimestamp: sent } }, now), /^m2 {2}malformed \(body is not JSON/);
  });
});
