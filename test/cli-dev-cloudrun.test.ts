// `crdfn dev --target cloudrun` as a person runs it from the README: a subprocess in its own
// process group, read by its output, inspected with kubectl and `crdfn status` / `crdfn dlq`, and
// stopped with Ctrl-C (SIGINT to the group). The examples reconcile through the Pub/Sub emulator,
// push and functions-framework; nothing is left running afterwards.
import { devEventKey } from "../cli/local/event-key.ts";
import { signedForTest } from "./support/event-key.ts";
import assert from "node:assert/strict";
import { execFile, spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { promisify } from "node:util";
import { pubSubClient } from "../clients/pubsub-client.ts";
import { readEnvFile } from "../cli/environment.ts";
import { encodeKeyEvent, messageGroupId, type KeyEvent } from "../core/event.ts";
import { pubSubNamesOf } from "../deploy/queue-names.ts";
import { controlPlaneBinaries } from "../emulator/binaries.ts";
import { packageRoot } from "../emulator/paths.ts";
import { eventually } from "./support/eventually.ts";

const run = promisify(execFile);
const main = join(packageRoot, "cli", "main.ts");

/** Command lines of running processes that contain `pattern`. */
function processes(pattern: string): string[] {
  const r = spawnSync("pgrep", ["-af", pattern], { encoding: "utf8" });
  return r.status === 0
    ? r.stdout
        .trim()
        .split("\n")
        .filter((l) => l && !l.includes("pgrep"))
    : [];
}

describe("crdfn dev --target cloudrun", { timeout: 300_000 }, () => {
  let dev: ChildProcess;
  let output = "";
  let stateDir: string;
  let env: Record<string, string>;
  let kubectlBin: string;
  const crdfn = async (...args: string[]) => (await run(process.execPath, [main, ...args, "--state-dir", stateDir], { encoding: "utf8" })).stdout;
  const kubectl = async (...args: string[]) => (await run(kubectlBin, ["--kubeconfig", join(stateDir, "kubeconfig"), ...args], { encoding: "utf8" })).stdout;

  before(async () => {
    kubectlBin = (await controlPlaneBinaries({ env: process.env, log: () => {} })).kubectl;
    stateDir = mkdtempSync(join(tmpdir(), "crdfn-dev-cloudrun-"));
    dev = spawn(process.execPath, [main, "dev", "--target", "cloudrun", "--state-dir", stateDir], { detached: true, stdio: ["ignore", "pipe", "pipe"] });
    dev.stdout!.on("data", (c: Buffer) => (output += c.toString()));
    dev.stderr!.on("data", (c: Buffer) => (output += c.toString()));
    await eventually(() => assert.match(output, /crdfn dev ready .*Cloud Run target/), { timeoutMs: 180_000 });
    env = readEnvFile(join(stateDir, "env"));
  });
  after(() => {
    if (dev.exitCode === null && dev.signalCode === null) process.kill(-dev.pid!, "SIGKILL");
    rmSync(stateDir, { recursive: true, force: true });
  });

  it("leaves out the Queue example, which needs SQS, in one line saying why, and runs the rest", () => {
    assert.match(output, /^Queue example left out: its effects call AWS \(cloud\.aws\), and the Cloud Run target runs no SQS$/m);
    assert.match(output, /crdfn dev ready .* — operators: CronTab, Greeting \(Cloud Run target/);
    assert.doesNotMatch(output, /Region is missing/);
  });

  it("reconciles the sample Greeting and CronTab and says so", async () => {
    await eventually(
      () => {
        assert.match(output, /Greeting hello-world reconciled/);
        assert.match(output, /CronTab my-new-cron-object reconciled/);
      },
      { timeoutMs: 60_000 },
    );
    assert.doesNotMatch(output, /ElasticMQ/, "no SQS server on the Cloud Run target");
  });

  it("shows the children to kubectl", async () => {
    const names = await kubectl("get", "configmap/hello-world-greeting", "cronjob/my-new-cron-object-cron", "-o", "name");
    assert.deepEqual(names.trim().split("\n"), ["configmap/hello-world-greeting", "cronjob.batch/my-new-cron-object-cron"]);
  });

  it("reports each operator's topic and push subscription, and the outcomes, with crdfn status", async () => {
    const out = await crdfn("status");
    assert.match(out, /greeting\s+crdfn-greeting-events\s+push\s+yes\s+5 deliveries\s+1s–10s\s+0/);
    assert.match(out, /crontab\s+crdfn-crontab-events\s+push\s+yes\s+5 deliveries\s+1s–10s\s+0/);
    assert.match(out, /Greeting default\/hello-world\s+True\s+Reconciled\s+yes/);
    assert.match(out, /CronTab default\/my-new-cron-object\s+True\s+Reconciled\s+yes/);
  });

  it("lists a dead letter and redrives it into its ordering key, to be reconciled", async () => {
    const greeting = JSON.parse(await kubectl("get", "greeting", "hello-world", "-o", "json")) as {
      metadata: { uid: string; resourceVersion: string; generation: number };
    };
    const event: KeyEvent = {
      v: 1,
      cluster: "local",
      group: "example.com",
      version: "v1",
      plural: "greetings",
      kind: "Greeting",
      namespace: "default",
      name: "hello-world",
      uid: greeting.metadata.uid,
      resourceVersion: greeting.metadata.resourceVersion,
      generation: greeting.metadata.generation,
      type: "MODIFIED",
      reason: "redrive-test",
      observedAt: new Date().toISOString(),
    };
    const names = pubSubNamesOf(env.PUBSUB_PROJECT_ID!, env.CRDFN_PUBSUB_PREFIX!, "greeting");
    const pubsub = await pubSubClient({ projectId: env.PUBSUB_PROJECT_ID!, emulatorHost: env.PUBSUB_EMULATOR_HOST! });
    try {
      await pubsub
        .topic(names.deadLetterTopic, { messageOrdering: true })
        .publishMessage({ data: Buffer.from(encodeKeyEvent(signedForTest(event, devEventKey(stateDir)))), orderingKey: messageGroupId(event) });
    } finally {
      await pubsub.close();
    }
    await eventually(async () => assert.match(await crdfn("dlq", "list"), /greeting\s+\S+\s+Greeting default\/hello-world\s+MODIFIED\/redrive-test/), {
      timeoutMs: 15_000,
      intervalMs: 1000,
    });
    assert.match(await crdfn("dlq", "redrive"), /redrove 1 message from crdfn-greeting-events-dead-letter to crdfn-greeting-events \(1 Greeting\)/);
    await eventually(() => assert.match(output, /Greeting hello-world reconciled in \d+ ms \(.*redrive-test\)/), { timeoutMs: 30_000 });
    assert.match(await crdfn("dlq", "list"), /the dead-letter subscriptions are empty: (greeting, crontab|crontab, greeting)/);
  });

  it("stops everything on Ctrl-C and leaves no process", async () => {
    const apiPort = /server: https:\/\/127\.0\.0\.1:(\d+)/.exec(readFileSync(join(stateDir, "kubeconfig"), "utf8"))![1]!;
    const [apiServer] = processes(`secure-port=${apiPort}`);
    const clusterDir = /--cert-dir=(\S+)\/apiserver/.exec(apiServer ?? "")?.[1];
    assert.ok(clusterDir, "kube-apiserver not found");
    const emulator = `127.0.0.1:${env.PUBSUB_EMULATOR_HOST!.split(":")[1]}`;
    assert.equal(processes(`addr ${emulator}`).length, 1, "the Pub/Sub emulator runs");
    const exited = new Promise<number | null>((resolve) => dev.once("exit", (code) => resolve(code)));
    process.kill(-dev.pid!, "SIGINT");
    assert.equal(await exited, 0);
    assert.match(output, /stopped/);
    assert.deepEqual(processes(clusterDir), []);
    assert.deepEqual(processes(`addr ${emulator}`), []);
    // This dev only (its state directory): other files' dev commands may be running beside it.
    assert.deepEqual(processes(`${main} dev .*--state-dir ${stateDir}`), []);
  });
});
