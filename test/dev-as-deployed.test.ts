// `crdfn dev` as deployed: the pipeline applies the operators' generated identities and admission
// policies and runs the functions and the bridge with their own tokens, so dev refuses what
// production refuses, and shows it as production does:
//   * a namespaced operator and a cluster-scoped one reconcile under their identities;
//   * a child that would take over someone else's object is ChildConflict, refused by the policy;
//   * an object created in a namespace not served is refused when it is applied, with one line;
//   * a status write the cluster refuses leaves a StatusWriteRefused Event and one log line, and
//     its message goes to the dead-letter queue after its receives.
import assert from "node:assert/strict";
import { Writable } from "node:stream";
import { after, before, describe, it } from "node:test";
import { pino } from "pino";
import { z } from "zod";
import { startPipeline, type Pipeline } from "../cli/local/pipeline.ts";
import { defineOperator, type Operator } from "../core/operator.ts";
import { testCluster, type TestCluster } from "./support/test-cluster.ts";
import greetingOperator from "../examples/greeting/operator.ts";
import { eventually } from "./support/eventually.ts";
import { adminKubectl, type Kubectl } from "./support/identities.ts";
import { ReceiveMessageCommand } from "@aws-sdk/client-sqs";
import { sqsClient } from "../clients/sqs-client.ts";

const authorizedKey = defineOperator({
  resource: { group: "keys.example.com", version: "v1", plural: "authorizedkeys", kind: "AuthorizedKey", scope: "Cluster" },
  spec: z.object({ key: z.string(), namespace: z.string() }),
  owns: [{ group: "", version: "v1", kind: "ConfigMap" }],
  reconcile: (k) => ({
    children: [{ apiVersion: "v1", kind: "ConfigMap", metadata: { name: `${k.metadata.name}-key`, namespace: k.spec.namespace }, data: { key: k.spec.key } }],
    status: { phase: "Ready" },
  }),
}) as Operator<unknown>;
const greeting = greetingOperator as Operator<unknown>;

describe("crdfn dev as deployed", { timeout: 300_000 }, () => {
  let cluster: TestCluster;
  /** This file's namespaces: the one served beside keyring, and keyring. */
  let NS = "";
  let KEYRING = "";
  let pipeline: Pipeline;
  let admin: Kubectl;
  const logs: Array<Record<string, unknown>> = [];

  before(async () => {
    // Two receives before the dead-letter queue (production: 5): the last test's path, without waiting out 5 + 10 + 20 + 40 s of backoff.
    cluster = await testCluster({ file: import.meta.filename, namespaces: ["keyring"], maxReceiveCount: 2 });
    NS = cluster.namespace;
    KEYRING = cluster.ns("keyring");
    admin = adminKubectl(cluster);
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        for (const line of chunk.toString("utf8").split("\n")) if (line) logs.push(JSON.parse(line) as Record<string, unknown>);
        done();
      },
    });
    pipeline = await startPipeline({
      cluster,
      queue: cluster.sqs,
      operators: [greeting, authorizedKey],
      logger: pino({ level: "warn" }, sink),
      functionLogLevel: "warn",
      identities: { namespaces: [NS, KEYRING] },
    });
  });
  after(async () => {
    await pipeline?.stop();
    await cluster?.stop();
  });

  const ready = (args: string[]) =>
    admin([...args, "-o", 'jsonpath={.status.conditions[?(@.type=="Ready")].status} {.status.conditions[?(@.type=="Ready")].reason}']);

  it("a namespaced operator and a cluster-scoped one reconcile under their generated identities", async () => {
    await admin(
      ["apply", "--server-side", "-f", "-"],
      JSON.stringify({ apiVersion: "example.com/v1", kind: "Greeting", metadata: { name: "hello", namespace: NS }, spec: { message: "hi" } }),
    );
    await admin(
      ["apply", "--server-side", "-f", "-"],
      JSON.stringify({
        apiVersion: "keys.example.com/v1",
        kind: "AuthorizedKey",
        metadata: { name: "alice" },
        spec: { key: "ssh-ed25519 alice", namespace: KEYRING },
      }),
    );
    await eventually(async () => assert.equal(await ready(["get", "greeting", "hello", "-n", NS]), "True Reconciled"), { timeoutMs: 60_000, intervalMs: 300 });
    await eventually(async () => assert.equal(await ready(["get", "authorizedkey", "alice"]), "True Reconciled"), { timeoutMs: 60_000, intervalMs: 300 });
    assert.equal(await admin(["get", "configmap", "alice-key", "-n", KEYRING, "-o", "jsonpath={.data.key}"]), "ssh-ed25519 alice");
    // Written by the function's own ServiceAccount (the audit-visible user), not by an admin.
    const canI = (verb: string, what: string, ns: string) =>
      admin(["auth", "can-i", verb, what, "-n", ns, "--as=system:serviceaccount:crdfn-functions:crdfn-greeting"]).then(
        (s) => s.trim(),
        (e: { stdout?: string }) => String(e.stdout).trim(),
      );
    assert.equal(await canI("get", "configmaps", NS), "no", "the Greeting function cannot read ConfigMaps");
    assert.equal(await canI("patch", "configmaps", "kube-system"), "no");
  });

  it("a child that would take over an unrelated object is ChildConflict: the admission policy refuses the write", async () => {
    await admin(["create", "configmap", "victim-greeting", "-n", NS, "--from-literal=mine=yes"]);
    await admin(
      ["apply", "--server-side", "-f", "-"],
      JSON.stringify({ apiVersion: "example.com/v1", kind: "Greeting", metadata: { name: "victim", namespace: NS }, spec: { message: "mine now" } }),
    );
    await eventually(async () => assert.equal(await ready(["get", "greeting", "victim", "-n", NS]), "False ChildConflict"), {
      timeoutMs: 60_000,
      intervalMs: 300,
    });
    assert.equal(await admin(["get", "configmap", "victim-greeting", "-n", NS, "-o", "jsonpath={.data.mine}"]), "yes", "untouched");
  });

  it("an object in a namespace not served is refused when it is applied, with one line", async () => {
    const out = await admin(
      ["apply", "--server-side", "-f", "-"],
      JSON.stringify({ apiVersion: "example.com/v1", kind: "Greeting", metadata: { name: "sneaky", namespace: "kube-system" }, spec: { message: "hi" } }),
    ).then(
      () => assert.fail("kube-system is not served"),
      (e: { stderr?: string }) => String(e.stderr),
    );
    assert.match(out, new RegExp(`crdfn: Greeting objects are reconciled only in namespaces ${NS}, ${KEYRING}, not in kube-system`));
  });

  it("a status write the cluster refuses: a StatusWriteRefused Event, one log line, then the dead-letter queue", async () => {
    // The cluster's own rule (not crdfn's): no status for Greetings labelled frozen.
    const policy = {
      apiVersion: "admissionregistration.k8s.io/v1",
      kind: "ValidatingAdmissionPolicy",
      metadata: { name: "frozen-greetings" },
      spec: {
        failurePolicy: "Fail",
        matchConstraints: { resourceRules: [{ apiGroups: ["example.com"], apiVersions: ["*"], resources: ["greetings/status"], operations: ["UPDATE"] }] },
        validations: [{ expression: "!has(object.metadata.labels) || !('frozen' in object.metadata.labels)", message: "frozen greetings take no status" }],
      },
    };
    // A Greeting labelled frozen before the rule: reconciled once, then the rule's probe.
    await admin(
      ["apply", "--server-side", "-f", "-"],
      JSON.stringify({
        apiVersion: "example.com/v1",
        kind: "Greeting",
        metadata: { name: "probe-frozen", namespace: NS, labels: { frozen: "yes" } },
        spec: { message: "probe" },
      }),
    );
    await eventually(async () => assert.equal(await ready(["get", "greeting", "probe-frozen", "-n", NS]), "True Reconciled"), {
      timeoutMs: 60_000,
      intervalMs: 300,
    });
    await admin(["apply", "--server-side", "-f", "-"], JSON.stringify(policy));
    await admin(
      ["apply", "--server-side", "-f", "-"],
      JSON.stringify({
        apiVersion: "admissionregistration.k8s.io/v1",
        kind: "ValidatingAdmissionPolicyBinding",
        metadata: { name: "frozen-greetings" },
        spec: { policyName: "frozen-greetings", validationActions: ["Deny"] },
      }),
    );
    // The policy is in force once a (dry-run) status write of the probe is refused: waited for, not slept.
    await eventually(
      async () => {
        const refused = await admin([
          "patch",
          "greeting",
          "probe-frozen",
          "-n",
          NS,
          "--subresource=status",
          "--type=merge",
          "-p",
          '{"status":{"phase":"probe"}}',
          "--dry-run=server",
        ]).then(
          () => "",
          (e: { stderr?: string }) => String(e.stderr),
        );
        assert.match(refused, /frozen greetings take no status/);
      },
      { timeoutMs: 30_000, intervalMs: 250 },
    );
    await admin(
      ["apply", "--server-side", "-f", "-"],
      JSON.stringify({
        apiVersion: "example.com/v1",
        kind: "Greeting",
        metadata: { name: "frozen", namespace: NS, labels: { frozen: "yes" } },
        spec: { message: "brr" },
      }),
    );
    await eventually(
      async () =>
        assert.match(
          await admin(["get", "events.events.k8s.io", "-n", NS, "--field-selector", "regarding.name=frozen", "-o", "jsonpath={.items[*].reason}"]),
          /StatusWriteRefused/,
        ),
      { timeoutMs: 60_000, intervalMs: 500 },
    );
    const note = await admin([
      "get",
      "events.events.k8s.io",
      "-n",
      NS,
      "--field-selector",
      "regarding.name=frozen",
      "-o",
      'jsonpath={.items[?(@.reason=="StatusWriteRefused")].note}',
    ]);
    assert.match(note, /the status write was refused .*frozen greetings take no status/);
    // (The function's one error line per receive is checked in functions/runtime/failure.test.ts.)
    // After the queue's receives (with growing backoff) the message is dead-lettered.
    const sqs = sqsClient(cluster.sqs);
    try {
      await eventually(
        async () => {
          const out = await sqs.send(new ReceiveMessageCommand({ QueueUrl: cluster.sqs.queues.fifoDlq, MaxNumberOfMessages: 10, VisibilityTimeout: 0 }));
          assert.ok((out.Messages ?? []).some((m) => (m.Body ?? "").includes('"name":"frozen"')));
        },
        { timeoutMs: 150_000, intervalMs: 2000 },
      );
    } finally {
      sqs.destroy();
    }
  });
});
