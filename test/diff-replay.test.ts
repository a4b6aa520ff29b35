// `crdfn diff` and `crdfn replay`, run as a person runs them (their own process, operator files on
// disk), on the embedded cluster: diff names exactly what a changed operator would change, writes
// nothing and exits 1, prints nothing and exits 0 for the deployed code, and lists a throwing
// object as failing; replay reproduces an object's and a dead letter's throw with its stack, and
// after the fix `--apply` makes the object Ready and empties the dead-letter queue, on SQS and on
// Pub/Sub.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { SendMessageCommand } from "@aws-sdk/client-sqs";
import { encodeKeyEvent, messageGroupId, type KeyEvent } from "../core/event.ts";
import { loadOperator } from "../cli/operators.ts";
import { packageRoot } from "../emulator/paths.ts";
import { startLocalPubSub, type LocalPubSub } from "../emulator/pubsub.ts";
import { pubSubClient } from "../clients/pubsub-client.ts";
import { pubSubNamesOf } from "../deploy/queue-names.ts";
import { signedForTest } from "./support/event-key.ts";
import { CLUSTER, crApi, pollerFor, ready, receiveAll, runtimeFor, startEnv, startTestBridge, waitFor, type Env } from "./support/functions-environment.ts";

const run = promisify(execFile);
const main = join(packageRoot, "cli", "main.ts");
const COUNT = Number(process.env.CRDFN_TEST_DIFF_OBJECTS ?? 50);
/** CRDFN_TEST_SHOW=1 prints what each command printed (docs/diff-and-replay.md shows such a session). */
const show = (what: string, r: { stdout: string; stderr: string }) => {
  if (process.env.CRDFN_TEST_SHOW) console.log(`# ${what}\n${r.stdout}${r.stderr}`);
};

/** The Greeting example's reconcile, its message written by `message` (JS over `g`), throwing for the spec "boom" when `bug`. */
const operatorSource = (message: string, bug: boolean) => `import { z } from "zod";
import { defineOperator } from "crdfn";

export default defineOperator({
  resource: { group: "example.com", version: "v1", plural: "greetings", kind: "Greeting" },
  spec: z.object({ message: z.string().min(1) }),
  status: z.object({ phase: z.string() }),
  owns: [{ group: "", version: "v1", kind: "ConfigMap" }],
  reconcile(g) {
    if (${bug} && g.spec.message === "boom") throw new Error("cannot greet " + g.metadata.name);
    return {
      children: [{ apiVersion: "v1", kind: "ConfigMap", metadata: { name: g.metadata.name + "-greeting", labels: { "example.com/greeting": g.metadata.name } }, data: { message: ${message} } }],
      status: { phase: "Ready" },
    };
  },
});
`;

describe("crdfn diff and crdfn replay", { timeout: 600_000 }, () => {
  let env: Env;
  let work: string;
  const files = { deployed: "", changed: "", fixed: "" };
  let stopPipeline: (() => Promise<void>) | undefined;
  const crdfn = async (args: string[], extra: NodeJS.ProcessEnv = {}): Promise<{ code: number; stdout: string; stderr: string }> => {
    try {
      const r = await run(process.execPath, ["--conditions=crdfn-source", main, ...args], {
        cwd: work,
        // The cluster the dead letters name: replay checks a letter's cluster and MAC (the keys: cluster.env's).
        env: { PATH: process.env.PATH, HOME: process.env.HOME, ...env.cluster.env, CRDFN_CLUSTER: CLUSTER, ...extra },
        maxBuffer: 64 * 1024 * 1024,
      });
      return { code: 0, ...r };
    } catch (e) {
      const r = e as { code: number; stdout: string; stderr: string };
      return { code: r.code, stdout: r.stdout, stderr: r.stderr };
    }
  };
  /** Every Greeting's and ConfigMap's resourceVersion in this file's namespace. */
  const versions = async (): Promise<Map<string, string>> => {
    const out = new Map<string, string>();
    const ns = env.cluster.namespace;
    const g = (await env.custom.listNamespacedCustomObject({ group: "example.com", version: "v1", plural: "greetings", namespace: ns })) as {
      items: Array<{ metadata: { name: string; resourceVersion: string } }>;
    };
    for (const i of g.items) out.set(`greeting/${i.metadata.name}`, i.metadata.resourceVersion);
    for (const i of (await env.core.listNamespacedConfigMap({ namespace: ns })).items)
      out.set(`configmap/${i.metadata?.name}`, i.metadata?.resourceVersion ?? "");
    return out;
  };

  before(async () => {
    mkdirSync(join(packageRoot, ".crdfn"), { recursive: true });
    // Beside the package, so an operator file's `import "crdfn"` resolves as in a user's project.
    work = mkdtempSync(join(packageRoot, ".crdfn", "diff-replay-"));
    files.deployed = join(work, "deployed.ts");
    files.changed = join(work, "changed.ts");
    files.fixed = join(work, "fixed.ts");
    writeFileSync(files.deployed, operatorSource("g.spec.message", true));
    writeFileSync(files.changed, operatorSource('g.spec.message + "!"', true));
    writeFileSync(files.fixed, operatorSource("g.spec.message", false));
    const deployed = await loadOperator(files.deployed);
    env = await startEnv([deployed], { file: import.meta.filename });
    const bridge = await startTestBridge(env, "example.com/v1/greetings>v1/configmaps");
    const poller = pollerFor(env, runtimeFor(env, deployed), "queue", 2);
    stopPipeline = async () => {
      await poller.stop();
      await bridge.stop(1000);
    };
    const crs = crApi(env, deployed);
    for (let i = 0; i < COUNT; i++) await crs.create(`g-${i}`, { message: `hello ${i}` });
    await waitFor(
      `${COUNT} Greetings Ready`,
      async () => {
        const all = await Promise.all(Array.from({ length: COUNT }, (_, i) => crs.get(`g-${i}`)));
        return all.every((cr) => ready(cr)?.status === "True" && cr?.status?.observedGeneration === cr?.metadata?.generation);
      },
      180_000,
    );
  });
  after(async () => {
    await stopPipeline?.();
    await env?.cluster.stop();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it("with the deployed code: prints nothing but its summary and exits 0", async () => {
    const r = await crdfn(["diff", "--operator", files.deployed, "-n", env.cluster.namespace]);
    assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
    assert.match(r.stdout, new RegExp(`^${COUNT} object\\(s\\): 0 would change .* 0 would fail, ${COUNT} unchanged`, "m"));
    assert.equal(r.stdout.trim().split("\n").length, 1, r.stdout);
  });

  it(`with a changed operator: lists exactly the ${COUNT} ConfigMaps with the changed field, writes nothing, exits 1`, async () => {
    const before = await versions();
    const r = await crdfn(["diff", "greeting", "--operator", files.changed, "-n", env.cluster.namespace]);
    show("diff, changed", r);
    assert.equal(r.code, 1, `${r.stdout}\n${r.stderr}`);
    const ns = env.cluster.namespace;
    for (let i = 0; i < COUNT; i++) {
      assert.ok(
        r.stdout.includes(`Greeting ${ns}/g-${i}\n  ~ ConfigMap ${ns}/g-${i}-greeting\n      data.message: "hello ${i}" → "hello ${i}!"\n`),
        `g-${i}:\n${r.stdout.slice(0, 2000)}`,
      );
    }
    const changedLines = r.stdout.split("\n").filter((l) => l.startsWith("      "));
    assert.equal(changedLines.length, COUNT, "one changed field per ConfigMap, nothing else");
    assert.ok(!/^ {2}[+-] /m.test(r.stdout), "nothing created or pruned");
    assert.ok(!r.stdout.includes("status."), "no status change: the phase is the same");
    assert.match(
      r.stdout,
      new RegExp(
        `^${COUNT} object\\(s\\): ${COUNT} would change \\(${COUNT} child\\(ren\\) changed, 0 created, 0 pruned, 0 status\\(es\\)\\), 0 would fail, 0 unchanged`,
        "m",
      ),
    );
    assert.deepEqual(await versions(), before, "every object's and child's resourceVersion unchanged");
  });

  it("an object whose reconcile throws is listed as failing, with its error", async () => {
    await crApi(env, await loadOperator(files.deployed)).create("boom", { message: "boom" });
    await waitFor(
      "boom's failure recorded by the deployed code",
      async () => ready(await crApi(env, await loadOperator(files.deployed)).get("boom"))?.reason === "ReconcileError",
      60_000,
    );
    const r = await crdfn(["diff", "greeting/boom", "--operator", files.changed, "-n", env.cluster.namespace]);
    show("diff, boom", r);
    assert.equal(r.code, 1, `${r.stdout}\n${r.stderr}`);
    assert.match(r.stdout, new RegExp(`^Greeting ${env.cluster.namespace}/boom\\n {2}! would fail: ReconcileError: cannot greet boom$`, "m"));
    assert.match(r.stdout, /^1 object\(s\): 0 would change .* 1 would fail, 0 unchanged/m);
  });

  it("replay kind/name (from the object, with --kubeconfig) shows its inputs and the throw with its stack, and writes nothing", async () => {
    const { KUBECONFIG: kubeconfig, ...withoutKubeconfig } = env.cluster.env;
    const r = await crdfn(["replay", "greeting/boom", "-n", env.cluster.namespace, "--operator", files.deployed, "--kubeconfig", kubeconfig ?? ""], {
      ...withoutKubeconfig,
      KUBECONFIG: "",
    });
    show("replay, from the object", r);
    assert.equal(r.code, 1, `${r.stdout}\n${r.stderr}`);
    assert.match(r.stdout, /spec:\n\s+message: boom/, "the inputs are printed");
    assert.match(r.stdout, /reconcile threw:\n {4}Error: cannot greet boom\n {8}at (?:Object\.)?reconcile \(.*deployed\.ts:\d+:\d+\)/, r.stdout + r.stderr);
    assert.match(r.stdout, /^outcome: retry-later/m);
    assert.ok(!(await versions()).has("configmap/boom-greeting"), "a dry run writes nothing");
    assert.notEqual(ready(await crApi(env, await loadOperator(files.deployed)).get("boom"))?.status, "True");
  });

  it("replay --dead-letter (SQS) shows the throw with its stack; after the fix, --apply makes it Ready and empties the dead-letter queue", async () => {
    // The fix is about to ship: nothing else reconciles boom meanwhile.
    await stopPipeline?.();
    stopPipeline = undefined;
    const boom = await crApi(env, await loadOperator(files.deployed)).get("boom");
    const { fifoDlq } = env.cluster.sqs.queues;
    const event = deadLetterOf(boom!);
    const sent = await env.sqs.send(
      new SendMessageCommand({
        QueueUrl: fifoDlq,
        MessageBody: encodeKeyEvent(event),
        MessageGroupId: messageGroupId(event),
        MessageDeduplicationId: "boom-dead-letter",
      }),
    );
    const id = sent.MessageId!;

    const failing = await crdfn(["replay", "--dead-letter", id, "--operator", files.deployed]);
    show("replay, failing", failing);
    assert.equal(failing.code, 1, `${failing.stdout}\n${failing.stderr}`);
    assert.match(
      failing.stdout,
      /reconcile threw:\n {4}Error: cannot greet boom\n {8}at (?:Object\.)?reconcile \(.*deployed\.ts:\d+:\d+\)/,
      failing.stdout + failing.stderr,
    );
    assert.match(failing.stdout, /^outcome: retry-later/m);
    assert.match(failing.stdout, /spec:\n\s+message: boom/, "the inputs are printed");
    assert.notEqual(ready(await crApi(env, await loadOperator(files.deployed)).get("boom"))?.status, "True", "a dry run writes nothing");
    assert.equal((await receiveAll(env, fifoDlq, 1)).length, 1, "the dead letter stays until it is reconciled");

    await waitFor("the dead letter visible again", async () => (await receiveAll(env, fifoDlq, 0)).length === 1, 30_000);
    const fixed = await crdfn(["replay", "--dead-letter", id, "--operator", files.fixed, "--apply"]);
    show("replay, fixed", fixed);
    assert.equal(fixed.code, 0, `${fixed.stdout}\n${fixed.stderr}`);
    assert.match(fixed.stdout, /dead letter .* removed: its object is reconciled/);
    const cr = await crApi(env, await loadOperator(files.fixed)).get("boom");
    assert.equal(ready(cr)?.status, "True");
    assert.equal((await env.core.readNamespacedConfigMap({ name: "boom-greeting", namespace: env.cluster.namespace })).data?.message, "boom");
    assert.deepEqual(await receiveAll(env, fifoDlq, 0), [], "the dead-letter queue is empty");
  });

  it("replay --dead-letter on Pub/Sub: the same", async () => {
    const local: LocalPubSub = await startLocalPubSub({ log: () => {} });
    const pubsub = await pubSubClient({ projectId: local.projectId, emulatorHost: local.host });
    try {
      const names = pubSubNamesOf(local.projectId, "crdfn-", "greeting");
      const [topic] = await pubsub.createTopic(names.deadLetterTopic);
      await topic.createSubscription(names.deadLetterSubscription);
      const crs = crApi(env, await loadOperator(files.deployed));
      await crs.create("boom-ps", { message: "boom" });
      const event = deadLetterOf((await crs.get("boom-ps"))!);
      const id = await topic.publishMessage({ data: Buffer.from(encodeKeyEvent(event)), orderingKey: messageGroupId(event) });
      const on = { ...local.env, CRDFN_PUBSUB_OPERATORS: "greeting", CRDFN_PUBSUB_PREFIX: "crdfn-", CRDFN_QUEUE_URL: "" };

      const failing = await crdfn(["replay", "--dead-letter", id, "--operator", files.deployed], on);
      assert.equal(failing.code, 1, `${failing.stdout}\n${failing.stderr}`);
      assert.match(
        failing.stdout,
        /reconcile threw:\n {4}Error: cannot greet boom-ps\n {8}at (?:Object\.)?reconcile \(.*deployed\.ts:\d+:\d+\)/,
        failing.stdout + failing.stderr,
      );

      const fixed = await crdfn(["replay", "--dead-letter", id, "--operator", files.fixed, "--apply"], on);
      assert.equal(fixed.code, 0, `${fixed.stdout}\n${fixed.stderr}`);
      assert.equal(ready(await crs.get("boom-ps"))?.status, "True");
      const list = await crdfn(["dlq", "list"], on);
      assert.match(list.stdout, /the dead-letter subscription is empty: greeting/, list.stdout + list.stderr);
    } finally {
      await pubsub.close();
      await local.stop();
    }
  });
});

/** The signed key event the bridge sent for `cr`, as it sits in a dead-letter queue. */
function deadLetterOf(cr: { metadata?: { name?: string; namespace?: string; uid?: string; resourceVersion?: string; generation?: number } }): KeyEvent {
  const m = cr.metadata!;
  return signedForTest({
    v: 2,
    cluster: CLUSTER,
    group: "example.com",
    version: "v1",
    plural: "greetings",
    kind: "Greeting",
    namespace: m.namespace!,
    name: m.name!,
    uid: m.uid!,
    resourceVersion: m.resourceVersion!,
    generation: m.generation ?? 1,
    type: "MODIFIED",
    reason: "watch",
    observedAt: new Date().toISOString(),
  });
}
