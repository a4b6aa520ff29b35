// `crdfn dev` as a person runs it: a subprocess in its own process group, read by its output,
// inspected with kubectl and `crdfn status` / `crdfn dlq`, and stopped with Ctrl-C (SIGINT to
// the group). Nothing may be left running afterwards.
import { devEventKey } from "../cli/local/event-key.ts";
import { signedForTest } from "./support/event-key.ts";
import assert from "node:assert/strict";
import { execFile, spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { promisify } from "node:util";
import { SendMessageCommand } from "@aws-sdk/client-sqs";
import { readEnvFile } from "../cli/environment.ts";
import { sqsClient, sqsSettingsOf } from "../clients/sqs-client.ts";
import { deduplicationId, encodeKeyEvent, messageGroupId, type KeyEvent } from "../core/event.ts";
import { controlPlaneBinaries } from "../emulator/binaries.ts";
import { packageRoot } from "../emulator/paths.ts";
import { eventually } from "./support/eventually.ts";
import { queuesAtRest } from "./support/settled.ts";

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

describe("crdfn dev", { timeout: 240_000 }, () => {
  let dev: ChildProcess;
  let output = "";
  let stateDir: string;
  let env: Record<string, string>;
  let kubectlBin: string;
  const crdfn = async (...args: string[]) => (await run(process.execPath, [main, ...args, "--state-dir", stateDir], { encoding: "utf8" })).stdout;
  const kubectl = async (...args: string[]) => (await run(kubectlBin, ["--kubeconfig", join(stateDir, "kubeconfig"), ...args], { encoding: "utf8" })).stdout;

  before(async () => {
    kubectlBin = (await controlPlaneBinaries({ env: process.env, log: () => {} })).kubectl;
    stateDir = mkdtempSync(join(tmpdir(), "crdfn-dev-state-"));
    dev = spawn(process.execPath, [main, "dev", "--state-dir", stateDir], { detached: true, stdio: ["ignore", "pipe", "pipe"] });
    dev.stdout!.on("data", (c: Buffer) => (output += c.toString()));
    dev.stderr!.on("data", (c: Buffer) => (output += c.toString()));
    await eventually(() => assert.match(output, /crdfn dev ready/), { timeoutMs: 120_000 });
    env = readEnvFile(join(stateDir, "env"));
  });
  after(() => {
    if (dev.exitCode === null && dev.signalCode === null) process.kill(-dev.pid!, "SIGKILL");
    rmSync(stateDir, { recursive: true, force: true });
  });

  it("reconciles the sample Greeting and CronTab once each and says so, with the README's API-call counts", async () => {
    const lines = (kind: string) => output.split("\n").filter((l) => l.startsWith(`✔ ${kind} `));
    await eventually(() => {
      assert.equal(lines("Greeting hello-world").length, 1);
      // At least: a firing (below) may already have brought a second line.
      assert.ok(lines("CronTab my-new-cron-object").length >= 1);
    });
    // Once the queues are at rest, nothing else came: the function's own finalizer and status
    // writes are not news, nor is its new child once its status write records it.
    await queuesAtRest(sqsClient(sqsSettingsOf(env)));
    const calls = (kind: string) => lines(kind).map((l) => /(\d+) API calls, (\w+)\)/.exec(l)!.slice(1));
    assert.deepEqual(calls("Greeting hello-world"), [["2", "watch"]]);
    // The sample's schedule, `* * * * */5`, fires every minute on Sundays and Fridays. Then the
    // CronJob controller writes its CronJob's status, which is news to the CronTab ("child"); on
    // other days, and before the first firing, there is no second reconcile.
    const [first, ...later] = calls("CronTab my-new-cron-object");
    assert.deepEqual(first, ["4", "watch"]);
    if (later.length > 0) {
      assert.deepEqual(new Set(later.map(([, trigger]) => trigger)), new Set(["child"]), `later CronTab reconciles: ${JSON.stringify(later)}`);
      const cronJob = JSON.parse(await kubectl("get", "cronjob", "my-new-cron-object-cron", "-o", "json")) as { status?: { lastScheduleTime?: string } };
      assert.ok(cronJob.status?.lastScheduleTime, "a CronTab reconciled again though the CronJob controller has not written its CronJob");
    }
  });

  it("prints what the README's npm start block shows, line for line (times and the state folder aside)", async () => {
    const readme = readFileSync(join(packageRoot, "README.md"), "utf8");
    const block = /`npm start` prints[^\n]*\n\n```text\n([\s\S]*?)```/.exec(readme)?.[1];
    assert.ok(block, "the README's npm start block");
    const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
    const pattern = (line: string) =>
      new RegExp(
        `^${escape(line)
          .replace(/\d+(\\\.\d+)?(?= ?m?s\b)/g, "\\d+(\\.\\d+)?")
          .replaceAll(escape(".crdfn/"), escape(`${stateDir}/`))}$`,
      );
    const lines = block.trimEnd().split("\n");
    await eventually(
      () => {
        const printed = output.split("\n");
        const missing = lines.filter((line) => !printed.some((p) => pattern(line).test(p)));
        assert.deepEqual(missing, [], `printed:\n${output}`);
      },
      { timeoutMs: 60_000 },
    );
  });

  it("shows the children to kubectl", async () => {
    const names = await kubectl("get", "configmap/hello-world-greeting", "cronjob/my-new-cron-object-cron", "-o", "name");
    assert.deepEqual(names.trim().split("\n"), ["configmap/hello-world-greeting", "cronjob.batch/my-new-cron-object-cron"]);
  });

  it("reports queues and outcomes with crdfn status", async () => {
    const out = await crdfn("status");
    assert.match(out, /events \(FIFO\)\s+\d+/);
    assert.match(out, /Greeting default\/hello-world\s+True\s+Reconciled\s+yes/);
    assert.match(out, /CronTab default\/my-new-cron-object\s+True\s+Reconciled\s+yes/);
  });

  it("lists a dead letter and redrives it to be reconciled", async () => {
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
    const sqs = sqsClient(sqsSettingsOf(env));
    try {
      await sqs.send(
        new SendMessageCommand({
          QueueUrl: env.CRDFN_DLQ_URL,
          MessageBody: encodeKeyEvent(signedForTest(event, devEventKey(stateDir))),
          MessageGroupId: messageGroupId(event),
          MessageDeduplicationId: deduplicationId(event, "redrive-test"),
        }),
      );
    } finally {
      sqs.destroy();
    }
    assert.match(await crdfn("dlq", "list"), /Greeting default\/hello-world\s+MODIFIED\/redrive-test/);
    // `dlq list` hides what it showed for a few seconds; redrive once it is visible again.
    await eventually(
      async () => assert.match(await crdfn("dlq", "redrive"), /redrove 1 message from crdfn-events-dlq\.fifo to crdfn-events\.fifo \(1 Greeting\)/),
      {
        timeoutMs: 15_000,
        intervalMs: 1000,
      },
    );
    await eventually(() => assert.match(output, /Greeting hello-world reconciled in \d+ ms \(.*redrive-test\)/));
    assert.match(await crdfn("dlq", "list"), /the dead-letter queue is empty/);
  });

  /** The environment's temp folder: every server has paths in it on its command line. */
  const clusterDirOf = (): string => {
    const apiPort = /server: https:\/\/127\.0\.0\.1:(\d+)/.exec(readFileSync(join(stateDir, "kubeconfig"), "utf8"))![1]!;
    const [apiServer] = processes(`secure-port=${apiPort}`);
    const clusterDir = /--cert-dir=(\S+)\/apiserver/.exec(apiServer ?? "")?.[1];
    assert.ok(clusterDir, "kube-apiserver not found");
    return clusterDir;
  };

  it(
    "restarts kube-apiserver, etcd and ElasticMQ each killed with kill -9, says so in one line, and reconciles a change after each",
    { timeout: 200_000 },
    async () => {
      // Not before dev applied its samples: a failed apply ends dev (its start-up, not its servers').
      await eventually(() => assert.match(output, /^applied: /m));
      const clusterDir = clusterDirOf();
      const pidOf = (pattern: string): number | undefined => {
        const found = processes(pattern).map((l) => Number(l.split(" ")[0]));
        return found.length === 1 ? found[0] : undefined;
      };
      const reconciled = () => output.split("\n").filter((l) => /^✔ Greeting hello-world reconciled/.test(l)).length;
      for (const [name, pattern] of [
        // (No leading dash: pgrep would take the pattern for an option.)
        ["kube-apiserver", `cert-dir=${clusterDir}/apiserver`],
        ["etcd", `data-dir=${clusterDir}/etcd`],
        ["ElasticMQ", `config.file=${clusterDir}/elasticmq/`],
      ] as const) {
        const killed = pidOf(pattern);
        assert.ok(killed, `${name} is running (${pattern})`);
        const said = new RegExp(`^${name} exited \\(SIGKILL\\); restarting it`, "m");
        assert.doesNotMatch(output, said);
        process.kill(killed, "SIGKILL");
        await eventually(() => assert.match(output, said), { timeoutMs: 20_000 });
        await eventually(() => assert.ok((pidOf(pattern) ?? killed) !== killed, `${name} running again`), { timeoutMs: 90_000, intervalMs: 250 });
        const before = reconciled();
        // A change after the restart (kubectl retried while the API server comes back).
        await eventually(() => kubectl("patch", "greeting", "hello-world", "--type=merge", "-p", JSON.stringify({ spec: { message: `after ${name}` } })), {
          timeoutMs: 90_000,
          intervalMs: 500,
        }).catch((e: unknown) => {
          const log = /its log: (\S+)/.exec(
            output
              .split("\n")
              .filter((l) => l.startsWith(`${name} exited`))
              .pop() ?? "",
          )?.[1];
          const tail = log ? spawnSync("tail", ["-n", "15", log], { encoding: "utf8" }).stdout : "";
          throw new Error(
            `${(e as Error).message}; what dev said about its servers: ${output
              .split("\n")
              .filter((l) => /exited|restart/.test(l))
              .join(
                " | ",
              )}; ${processes(pattern).length} running; its log ends:\n${tail}\ndev's last lines:\n${output.trimEnd().split("\n").slice(-8).join("\n")}`,
          );
        });
        await eventually(() => assert.ok(reconciled() > before, `a reconcile after ${name}'s restart`), { timeoutMs: 60_000 });
        await eventually(
          async () =>
            assert.equal(
              (JSON.parse(await kubectl("get", "configmap", "hello-world-greeting", "-o", "json")) as { data?: { message?: string } }).data?.message,
              `after ${name}`,
            ),
          { timeoutMs: 30_000 },
        );
      }
      assert.equal(output.split("\n").filter((l) => / exited \(SIGKILL\); restarting it/.test(l)).length, 3, "one line per restart");
    },
  );

  it("stops everything on Ctrl-C and leaves no process", async () => {
    const clusterDir = clusterDirOf();
    assert.ok(processes(clusterDir).length >= 4, "expected etcd, kube-apiserver, kube-controller-manager and ElasticMQ");
    const exited = new Promise<number | null>((resolve) => dev.once("exit", (code) => resolve(code)));
    process.kill(-dev.pid!, "SIGINT");
    assert.equal(await exited, 0);
    assert.match(output, /stopped/);
    assert.deepEqual(processes(clusterDir), []);
    // This dev only (its state directory): other files' dev commands may be running beside it.
    assert.deepEqual(processes(`${main} dev .*--state-dir ${stateDir}`), []);
  });
});
