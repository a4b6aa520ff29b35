// `crdfn dlq redrive` empties the dead-letter queue in one run, FIFO groups with several dead
// letters included (a FIFO queue hands out one message per group while one is in flight); and
// `crdfn status` / `crdfn dlq` cover every operator's queues of a deployment, named by its deploy
// settings, and say in one line when the queue they were pointed at is gone.
import { signedForTest } from "./support/event-key.ts";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { promisify } from "node:util";
import { after, before, describe, it } from "node:test";
import { CreateQueueCommand, GetQueueAttributesCommand, SendMessageCommand, type SQSClient } from "@aws-sdk/client-sqs";
import { stringify } from "yaml";
import { redrive } from "../cli/admin/dlq.ts";
import { encodeKeyEvent, type KeyEvent } from "../core/event.ts";
import { sqsClient } from "../clients/sqs-client.ts";
import { packageRoot } from "../emulator/paths.ts";
import { eventually } from "./support/eventually.ts";
import { testCluster, type TestCluster } from "./support/test-cluster.ts";

const run = promisify(execFile);
const main = join(packageRoot, "cli", "main.ts");

describe("dlq redrive", { timeout: 120_000 }, () => {
  let cluster: TestCluster;
  let sqs: SQSClient;
  before(async () => {
    cluster = await testCluster({ file: import.meta.filename });
    sqs = sqsClient(cluster.sqs);
  });
  after(async () => {
    sqs?.destroy();
    await cluster?.stop();
  });
  let work: string | undefined;
  after(() => {
    if (work) rmSync(work, { recursive: true, force: true });
  });
  const visible = async (url: string): Promise<number> =>
    Number(
      (await sqs.send(new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ["ApproximateNumberOfMessages"] }))).Attributes
        ?.ApproximateNumberOfMessages,
    );

  it("moves every message of every group in one run and says what it moved", async () => {
    const { fifo, fifoDlq } = cluster.sqs.queues;
    for (let g = 0; g < 5; g++) {
      for (let i = 0; i < 3; i++) {
        const event = {
          v: 1,
          cluster: "c",
          group: "example.com",
          version: "v1",
          plural: "greetings",
          kind: "Greeting",
          namespace: "ns",
          name: `g${g}`,
          uid: "u",
          resourceVersion: String(i + 1),
          generation: 1,
          type: "MODIFIED",
          observedAt: new Date().toISOString(),
        } as const;
        await sqs.send(
          new SendMessageCommand({
            QueueUrl: fifoDlq,
            MessageBody: encodeKeyEvent(signedForTest(event)),
            MessageGroupId: `group-${g}`,
            MessageDeduplicationId: `d-${g}-${i}`,
          }),
        );
      }
    }
    const moved = await redrive(sqs, fifoDlq, fifo, 1000);
    assert.equal(moved.count, 15);
    assert.deepEqual([...moved.byKind], [["Greeting", 15]]);
    assert.equal(await visible(fifoDlq), 0, "the dead-letter queue is empty");
    assert.equal(await visible(fifo), 15);
  });

  /** crdfn as a person runs it: its own process, an environment of its own; stdout, stderr and the exit code. */
  async function crdfn(args: string[], cwd: string, env: NodeJS.ProcessEnv): Promise<{ code: number; stdout: string; stderr: string }> {
    try {
      const r = await run(process.execPath, ["--conditions=crdfn-source", main, ...args], {
        cwd,
        env: { PATH: process.env.PATH, HOME: process.env.HOME, ...env },
      });
      return { code: 0, ...r };
    } catch (e) {
      const r = e as { code: number; stdout: string; stderr: string };
      return { code: r.code, stdout: r.stdout, stderr: r.stderr };
    }
  }

  it("status and dlq cover every operator's event and dead-letter queue a deployment's settings name, and no other queue", async () => {
    // A deployment's queues (<prefix><operator>.fifo and -dlq.fifo), on the SQS-compatible ElasticMQ.
    const prefix = "crdfn-shop-";
    const url = async (name: string) => (await sqs.send(new CreateQueueCommand({ QueueName: name, Attributes: { FifoQueue: "true" } }))).QueueUrl!;
    const queues: Record<string, string> = {};
    for (const op of ["greeting", "crontab"]) for (const name of [`${prefix}${op}.fifo`, `${prefix}${op}-dlq.fifo`]) queues[name] = await url(name);
    const base = queues[`${prefix}greeting.fifo`]!.replace(/\/[^/]+$/, "");
    const event: KeyEvent = {
      v: 1,
      cluster: "c",
      group: "stable.example.com",
      version: "v1",
      plural: "crontabs",
      kind: "CronTab",
      namespace: "ns",
      name: "nightly",
      uid: "u",
      resourceVersion: "7",
      generation: 1,
      type: "MODIFIED",
      observedAt: new Date().toISOString(),
    };
    await sqs.send(
      new SendMessageCommand({
        QueueUrl: queues[`${prefix}crontab-dlq.fifo`],
        MessageBody: encodeKeyEvent(signedForTest(event)),
        MessageGroupId: "g",
        MessageDeduplicationId: "d",
      }),
    );

    mkdirSync(join(packageRoot, ".crdfn"), { recursive: true });
    work = mkdtempSync(join(packageRoot, ".crdfn", "admin-"));
    const examples = relative(work, join(packageRoot, "examples"));
    writeFileSync(
      join(work, "crdfn.deploy.yaml"),
      stringify({
        project: "shop",
        operators: [{ module: `${examples}/greeting/operator.ts` }, { module: `${examples}/crontab/operator.ts` }],
        queues: { urlBase: base, region: cluster.sqs.region },
      }),
    );
    // AWS credentials and the cluster from the environment, as against a real deployment; nothing local.
    const env = { AWS_ACCESS_KEY_ID: cluster.sqs.accessKeyId, AWS_SECRET_ACCESS_KEY: cluster.sqs.secretAccessKey, KUBECONFIG: cluster.kubeconfigPath };

    const status = await crdfn(["status", "--settings", "crdfn.deploy.yaml"], work, env);
    assert.equal(status.code, 0, status.stderr);
    for (const name of Object.keys(queues)) assert.match(status.stdout, new RegExp(`\\s${name.replace(/\./g, "\\.")}\n`), name);
    assert.match(status.stdout, /^ {2}crontab dead letters \(FIFO\)\s+1\s+0\s+0\s+crdfn-shop-crontab-dlq\.fifo$/m);
    assert.match(status.stdout, /^ {2}crontab {2}\S+ {2}CronTab ns\/nightly {2}MODIFIED/m);
    assert.match(status.stdout, /^ {2}greeting {2}-$/m);
    assert.doesNotMatch(status.stdout + status.stderr, /requeue|standard/i);

    const list = await crdfn(["dlq", "list", "--settings", "crdfn.deploy.yaml"], work, env);
    assert.equal(list.code, 0, list.stderr);
    assert.match(list.stdout, /^crontab {2}\S+ {2}CronTab ns\/nightly {2}MODIFIED {2}cluster c/m);
    assert.match(list.stdout, /^empty: greeting$/m);

    // Found in the current folder with nothing local set up: used, and said so. (`dlq list` hides
    // what it showed for a few seconds: redrive once it is visible again.)
    await eventually(
      async () => {
        const redriven = await crdfn(["dlq", "redrive", "--state-dir", join(work!, "no-state")], work!, env);
        assert.equal(redriven.code, 0, redriven.stderr);
        assert.match(
          redriven.stderr,
          /^crdfn: queues from \.\/crdfn\.deploy\.yaml \(nothing local in .*no-state\/env or the environment; --settings names another\)$/m,
        );
        assert.deepEqual(redriven.stdout.trim().split("\n"), [
          "redrove 0 messages from crdfn-shop-greeting-dlq.fifo to crdfn-shop-greeting.fifo",
          "redrove 1 message from crdfn-shop-crontab-dlq.fifo to crdfn-shop-crontab.fifo (1 CronTab)",
        ]);
      },
      { timeoutMs: 20_000, intervalMs: 1000 },
    );
    assert.equal(await visible(queues[`${prefix}crontab.fifo`]!), 1);
  });

  it("says in one line, without a stack, that the queue a stale .crdfn/env names is gone", async () => {
    const stateDir = mkdtempSync(join(tmpdir(), "crdfn-stale-"));
    after(() => rmSync(stateDir, { recursive: true, force: true }));
    writeFileSync(
      join(stateDir, "env"),
      "AWS_REGION=us-east-1\nAWS_ENDPOINT_URL_SQS=http://127.0.0.1:9\nAWS_ACCESS_KEY_ID=x\nAWS_SECRET_ACCESS_KEY=y\n" +
        "CRDFN_QUEUE_URL=http://127.0.0.1:9/000000000000/crdfn-events.fifo\nCRDFN_DLQ_URL=http://127.0.0.1:9/000000000000/crdfn-events-dlq.fifo\n" +
        `KUBECONFIG=${join(stateDir, "kubeconfig")}\n`,
    );
    for (const args of [["status"], ["dlq", "list"], ["dlq", "redrive"]]) {
      const r = await crdfn([...args, "--state-dir", stateDir], stateDir, {});
      assert.equal(r.code, 2, `${args.join(" ")}: ${r.stderr}`);
      assert.equal(r.stderr.trim().split("\n").length, 1, r.stderr);
      assert.match(
        r.stderr.trim(),
        /^crdfn: cannot reach the queue crdfn-events(-dlq)?\.fifo at http:\/\/127\.0\.0\.1:9 \(ECONNREFUSED; from .*stale-\w+\/env\): is the crdfn dev or crdfn cluster up that wrote it still running\?$/,
      );
    }
  });
});
