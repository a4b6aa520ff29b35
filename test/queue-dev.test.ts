// The Queue example in `crdfn dev`, as a person runs it (a subprocess; kubectl and an SQS client
// on the state directory's environment): applying the sample creates its queue in ElasticMQ with
// the URL and ARN in status; a queue deleted by hand is back within the timer's period; deleting
// the object deletes the queue (finalize) before the object goes.
import assert from "node:assert/strict";
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { promisify } from "node:util";
import { DeleteQueueCommand, GetQueueAttributesCommand, GetQueueUrlCommand, QueueDoesNotExist, type SQSClient } from "@aws-sdk/client-sqs";
import { readEnvFile } from "../cli/environment.ts";
import { sqsClient, sqsSettingsOf } from "../clients/sqs-client.ts";
import { controlPlaneBinaries } from "../emulator/binaries.ts";
import { packageRoot } from "../emulator/paths.ts";
import { queueName } from "../examples/queue/operator.ts";
import { OWN_CHILD_HOLD_MS } from "../bridge/child-tracker.ts";
import { eventually } from "./support/eventually.ts";

const run = promisify(execFile);
const main = join(packageRoot, "cli", "main.ts");
const example = join(packageRoot, "examples", "queue");

describe("the Queue example in crdfn dev", { timeout: 360_000 }, () => {
  let dev: ChildProcess;
  let output = "";
  let stateDir: string;
  let sqs: SQSClient;
  let kubectlBin: string;
  let name: string;
  const kubectl = async (...args: string[]) => (await run(kubectlBin, ["--kubeconfig", join(stateDir, "kubeconfig"), ...args], { encoding: "utf8" })).stdout;
  const urlOf = async (): Promise<string | undefined> => {
    try {
      return (await sqs.send(new GetQueueUrlCommand({ QueueName: name }))).QueueUrl;
    } catch (e) {
      if (e instanceof QueueDoesNotExist) return undefined;
      throw e;
    }
  };

  /** Until no reconcile line has been printed for 3 s. */
  /**
   * No reconcile line for longer than the bridge holds an announcement of the function's own child
   * write (OWN_CHILD_HOLD_MS), plus 3 s for its reconcile: a held "child" reconcile would have
   * shown by then, on a loaded machine too.
   */
  const quiet = async () => {
    let last = output.length;
    let since = Date.now();
    while (Date.now() - since < OWN_CHILD_HOLD_MS + 3000) {
      await new Promise((r) => setTimeout(r, 250));
      if (output.length !== last) [last, since] = [output.length, Date.now()];
    }
  };

  before(async () => {
    kubectlBin = (await controlPlaneBinaries({ env: process.env, log: () => {} })).kubectl;
    stateDir = mkdtempSync(join(tmpdir(), "crdfn-queue-dev-"));
    dev = spawn(process.execPath, [main, "dev", "--state-dir", stateDir, "--operator", join(example, "operator.ts"), "--apply", join(example, "sample.yaml")], {
      detached: true,
      stdio: ["ignore", "pipe", "pipe"],
    });
    dev.stdout!.on("data", (c: Buffer) => (output += c.toString()));
    dev.stderr!.on("data", (c: Buffer) => (output += c.toString()));
    await eventually(() => assert.match(output, /crdfn dev ready/), { timeoutMs: 150_000 });
    sqs = sqsClient(sqsSettingsOf(readEnvFile(join(stateDir, "env"))));
  });
  after(() => {
    sqs?.destroy();
    if (dev.exitCode === null && dev.signalCode === null) process.kill(-dev.pid!, "SIGKILL");
    rmSync(stateDir, { recursive: true, force: true });
  });

  it("creates the sample's queue, with its URL and ARN in status and the spec's attributes", async () => {
    await eventually(() => assert.match(output, /Queue orders reconciled/), { timeoutMs: 60_000 });
    const uid = await kubectl("get", "queue", "orders", "-n", "default", "-o", "jsonpath={.metadata.uid}");
    name = queueName({ metadata: { namespace: "default", name: "orders", uid } });
    const [url, arn, ready] = (
      await kubectl("get", "queue", "orders", "-n", "default", "-o", 'jsonpath={.status.url} {.status.arn} {.status.conditions[?(@.type=="Ready")].status}')
    ).split(" ");
    assert.equal(url, await urlOf());
    assert.match(arn ?? "", new RegExp(`^arn:aws:sqs:[a-z0-9-]+:\\d+:${name}$`));
    assert.equal(ready, "True");
    const { Attributes } = await sqs.send(new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ["VisibilityTimeout"] }));
    assert.equal(Attributes?.VisibilityTimeout, "60");
    assert.equal(await kubectl("get", "configmap", "orders-queue", "-n", "default", "-o", "jsonpath={.data.url}"), url);
  });

  it("re-creates the queue when it is deleted by hand, at the next tick of its 30 s timer", async () => {
    // Settled first (no announcement of its new ConfigMap still held): then only the timer is left.
    await quiet();
    const url = await urlOf();
    const seen = output.length;
    await sqs.send(new DeleteQueueCommand({ QueueUrl: url }));
    assert.equal(await urlOf(), undefined);
    await eventually(async () => assert.equal(await urlOf(), url), { timeoutMs: 120_000, intervalMs: 1000 });
    // Nothing in the cluster changed: what reconciled it was its schedule (status.nextReconcile, Requeue).
    // The queue is back at the effect step; the line is printed after the status write that follows.
    await eventually(() => assert.match(output.slice(seen), /^✔ Queue orders reconciled in \d+ ms \(ns default, \d+ API calls, requeue\)$/m), {
      timeoutMs: 60_000,
    });
    assert.doesNotMatch(output.slice(seen), /Queue orders reconciled .*(watch|child)\)/);
    assert.equal(await kubectl("get", "queue", "orders", "-n", "default", "-o", "jsonpath={.status.url}"), url);
  });

  it("deletes the queue when the object is deleted (finalize), before the object goes", async () => {
    assert.notEqual(await urlOf(), undefined);
    // kubectl waits until the object is gone: after finalize deleted the queue and released it.
    await kubectl("delete", "queue", "orders", "-n", "default", "--timeout=120s");
    assert.equal(await urlOf(), undefined);
  });

  it("stops on Ctrl-C", async () => {
    const exited = new Promise<number | null>((resolve) => dev.once("exit", (code) => resolve(code)));
    process.kill(-dev.pid!, "SIGINT");
    assert.equal(await exited, 0);
  });
});
