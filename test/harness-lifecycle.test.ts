// Nothing outlives its owner: a clean stop and a SIGKILLed owner both leave no etcd,
// kube-apiserver, kube-controller-manager or java behind, and no temp folder.
import assert from "node:assert/strict";
import { spawn, execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { describe, it, type TestContext } from "node:test";
import { ReceiveMessageCommand, SendMessageCommand } from "@aws-sdk/client-sqs";
import { controlPlaneBinaries } from "../emulator/binaries.ts";
import { startCluster } from "../emulator/cluster.ts";
import { sqsClient } from "../clients/sqs-client.ts";
import { elasticMqClasspath } from "../emulator/elasticmq.ts";
import { SetupError } from "../emulator/errors.ts";
import { eventually } from "./support/eventually.ts";

/** A cache folder with nothing built in it, removed when the test ends. */
function emptyCacheDir(t: TestContext): string {
  const dir = mkdtempSync(join(tmpdir(), "crdfn-cache-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** Processes whose command line mentions the environment's temp folder (every server gets paths in it). */
function processesUsing(dir: string): string[] {
  try {
    return execFileSync("pgrep", ["-af", dir], { encoding: "utf8" }).trim().split("\n").filter(Boolean);
  } catch {
    return []; // pgrep exits 1 when nothing matches
  }
}

describe("environment lifecycle", { timeout: 120_000 }, () => {
  it("stop() ends every server and removes the temp folder", async () => {
    const c = await startCluster({ log: () => {} });
    const dir = c.kubeconfigPath.replace(/\/kubeconfig$/, "");
    assert.ok(processesUsing(dir).length >= 4, "expected etcd, kube-apiserver, kube-controller-manager and java");
    await c.stop();
    assert.deepEqual(processesUsing(dir), []);
    assert.equal(existsSync(dir), false);
  });

  it("a SIGKILLed owner leaves nothing behind", async () => {
    const child = spawn(process.execPath, [join(import.meta.dirname, "support", "start-and-report.ts")], { stdio: ["ignore", "pipe", "inherit"] });
    const [line] = await createInterface({ input: child.stdout })
      [Symbol.asyncIterator]()
      .next()
      .then((r) => [r.value as string]);
    const { dir } = JSON.parse(line!) as { dir: string };
    assert.ok(processesUsing(dir).length >= 4);
    child.kill("SIGKILL");
    await eventually(
      () => {
        assert.deepEqual(processesUsing(dir), []);
        assert.equal(existsSync(dir), false);
      },
      { timeoutMs: 20_000 },
    );
  });

  it("keeps queued messages across a queue restart, as SQS would through an outage", async () => {
    const c = await startCluster({ controllerManager: false, log: () => {} });
    const sqs = sqsClient(c.sqs);
    try {
      const q = c.sqs.queues.fifo;
      await sqs.send(new SendMessageCommand({ QueueUrl: q, MessageBody: "durable", MessageGroupId: "g", MessageDeduplicationId: "d" }));
      await c.queue.stop();
      await c.queue.start();
      const got = await sqs.send(new ReceiveMessageCommand({ QueueUrl: q, WaitTimeSeconds: 2 }));
      assert.deepEqual(
        got.Messages?.map((m) => m.Body),
        ["durable"],
      );
    } finally {
      sqs.destroy();
      await c.stop();
    }
  });

  it("names the alternative in one line when Go is missing", async (t) => {
    const env = { PATH: "/nonexistent", CRDFN_CACHE_DIR: emptyCacheDir(t) };
    const err = await controlPlaneBinaries({ env, log: () => {} }).then(
      () => assert.fail("built without Go"),
      (e: unknown) => e,
    );
    assert.ok(err instanceof SetupError);
    assert.match(err.message, /^Go is not installed.*KUBEBUILDER_ASSETS/);
    assert.equal(err.message.includes("\n"), false);
  });

  it("names the alternative in one line when Java is missing", (t) => {
    const env = { PATH: "/nonexistent", CRDFN_CACHE_DIR: emptyCacheDir(t) };
    assert.throws(
      () => elasticMqClasspath(env, () => {}),
      (e: unknown) => e instanceof SetupError && /^Java is not installed.*CRDFN_SQS_ENDPOINT/.test(e.message) && !e.message.includes("\n"),
    );
  });
});
