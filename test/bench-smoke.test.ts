// `npm run bench` end to end with tiny numbers: it runs the whole pipeline and writes every field.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { packageRoot } from "../emulator/paths.ts";

const run = promisify(execFile);

const latencyKeys = ["samples", "p50Ms", "p95Ms", "p99Ms", "maxMs", "meanMs"];
const cpuKeys = ["percentOfOneCore", "machineBusyPercent", "bridgePublishDelayMs"];
const reconcileKeys = ["reconciles", "outcomes", "apiCallsPerReconcile", "handlerLatency"];

function hasKeys(o: unknown, keys: readonly string[], where: string): Record<string, unknown> {
  assert.ok(typeof o === "object" && o !== null, `${where} is an object`);
  const rec = o as Record<string, unknown>;
  for (const k of keys) assert.ok(k in rec, `${where}.${k} is present`);
  return rec;
}

describe("npm run bench (smoke)", { timeout: 150_000 }, () => {
  it("--objects 20 --rate 10 --duration 3 prints the table and writes a complete JSON", { timeout: 150_000 }, async () => {
    const dir = mkdtempSync(join(tmpdir(), "crdfn-bench-smoke-"));
    try {
      const json = join(dir, "out.json");
      const { stdout } = await run(process.execPath, ["bench/main.ts", "--objects", "20", "--rate", "10", "--duration", "3", "--json", json], {
        cwd: packageRoot,
        timeout: 140_000,
      });
      assert.match(stdout, /full load \/ raw ceiling/);
      assert.match(stdout, /latency p99 .*(PASS|MISS)/);
      assert.match(stdout, /per million changes: SQS \$[\d.]+ \+ Lambda requests \$[\d.]+ \+ Lambda duration \$[\d.]+ = \$[\d.]+/);

      const r = hasKeys(
        JSON.parse(readFileSync(json, "utf8")),
        ["machine", "params", "setup", "rated", "closedLoop", "rawCeiling", "fullLoad", "ratioToRaw", "closedLoopRatioToRaw", "bridge", "targets", "cost"],
        "result",
      );
      assert.deepEqual(r.params, { target: "lambda", objects: 20, rate: 10, durationSeconds: 3, concurrency: 20, receiveLoops: 4 });

      const setup = hasKeys(r.setup, ["createSeconds", "allReadySeconds", "drainSeconds", "cpu", ...reconcileKeys], "setup");
      assert.ok((setup.reconciles as number) >= 20, "every Greeting was reconciled at creation");

      const rated = hasKeys(r.rated, ["writes", "writeErrors", "unobserved", "latency", "cpu", ...reconcileKeys], "rated");
      // A timed phase (10 changes/s for 3 s): bounds, never an exact count.
      const writes = rated.writes as number;
      assert.ok(writes >= 24 && writes <= 36, `about 30 writes in the rated phase (${writes})`);
      assert.equal(rated.writeErrors, 0);
      const latency = hasKeys(rated.latency, latencyKeys, "rated.latency");
      assert.equal((latency.samples as number) + (rated.unobserved as number), writes, "every write is a sample or counted unobserved");
      assert.ok((latency.p50Ms as number) > 0 && (latency.p50Ms as number) <= (latency.p99Ms as number));
      const cpu = hasKeys(rated.cpu, [...cpuKeys, "bridgeMessages"], "rated.cpu");
      hasKeys(cpu.percentOfOneCore, ["bridge", "apiServer", "etcd", "elasticMq", "bench"], "rated.cpu.percentOfOneCore");
      const calls = hasKeys(rated.apiCallsPerReconcile, ["mean", "min", "max", "histogram"], "rated.apiCallsPerReconcile");
      assert.ok((calls.mean as number) >= 1);

      const closed = hasKeys(r.closedLoop, ["changes", "unobserved", "reconcilesPerSecond", "latency", "cpu", ...reconcileKeys], "closedLoop");
      assert.ok((closed.reconcilesPerSecond as number) > 0);
      hasKeys(closed.latency, latencyKeys, "closedLoop.latency");
      const full = hasKeys(r.fullLoad, ["writes", "writeErrors", "writesPerSecond", "reconcilesPerSecond", "cpu", ...reconcileKeys], "fullLoad");
      // 20 writers on 20 objects keep every object hot, so its reconciles may all conflict: no
      // lower bound on reconciles here, only that the writers ran.
      assert.ok((full.writes as number) > 0 && typeof full.reconcilesPerSecond === "number");
      const raw = hasKeys(r.rawCeiling, ["patches", "errors", "patchesPerSecond", "latency", "cpu"], "rawCeiling");
      assert.ok((raw.patchesPerSecond as number) > 0);
      assert.equal(typeof r.ratioToRaw, "number");

      const bridge = hasKeys(r.bridge, ["pid", "maxRssBytes", "maxMetricRssBytes", "maxHeapUsedBytes", "nodeOptions"], "bridge");
      assert.ok((bridge.maxRssBytes as number) > 10 * 2 ** 20, "the bridge process's RSS was sampled");
      assert.ok((bridge.maxHeapUsedBytes as number) > 0, "the bridge's /metrics was scraped");
      assert.equal((r.targets as unknown[]).length, 4);

      // The rated phase priced: every change was sent, received and deleted through the counted
      // clients, and the function's time and memory are those measured and deployed.
      const cost = hasKeys(r.cost, ["usage", "perMillionChanges", "pod", "podMonthly", "breakEvenChangesPerSecond", "prices"], "cost");
      const usage = hasKeys(cost.usage, ["queueRequestsPerChange", "invocationsPerChange", "functionMsPerChange", "memoryMiB", "architecture"], "cost.usage");
      assert.ok((usage.queueRequestsPerChange as number) > 0, "queue requests were counted in the rated phase");
      assert.ok((usage.functionMsPerChange as number) > 0 && (usage.memoryMiB as number) > 0);
      const million = hasKeys(cost.perMillionChanges, ["sqs", "lambdaRequests", "lambdaDuration", "total", "gbSecondsPerChange"], "cost.perMillionChanges");
      assert.ok((million.total as number) > 0 && (cost.breakEvenChangesPerSecond as number) > 0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("--target cloudrun: the setup and rated phases on Pub/Sub and push, every publish and push counted and priced", { timeout: 150_000 }, async () => {
    const dir = mkdtempSync(join(tmpdir(), "crdfn-bench-smoke-"));
    try {
      const json = join(dir, "out.json");
      const { stdout } = await run(
        process.execPath,
        ["bench/main.ts", "--target", "cloudrun", "--objects", "20", "--rate", "10", "--duration", "3", "--json", json],
        { cwd: packageRoot, timeout: 140_000 },
      );
      assert.match(stdout, /per million changes: Pub\/Sub \$[\d.]+ \+ Cloud Run requests \$[\d.]+ \+ vCPU-s \$[\d.]+ \+ GiB-s \$[\d.]+ = \$[\d.]+/);
      const r = hasKeys(JSON.parse(readFileSync(json, "utf8")), ["machine", "params", "setup", "rated", "bridge", "targets", "cost"], "result");
      assert.equal((r.params as { target: string }).target, "cloudrun");
      assert.ok(!("closedLoop" in r) && !("fullLoad" in r), "the phases under load are the lambda target's");
      const rated = hasKeys(r.rated, ["writes", "unobserved", "pushes", ...reconcileKeys], "rated");
      const pushes = hasKeys(
        rated.pushes,
        ["bridge", "requests", "firstAttempts", "redeliveries", "acked", "requestLatency", "billedMs", "billedBytes"],
        "rated.pushes",
      );
      const bridge = hasKeys(pushes.bridge, ["publishCalls", "messages"], "rated.pushes.bridge");
      // Everything the bridge published in the phase was pushed (the count runs until the queue is at rest).
      assert.ok((bridge.messages as number) > 0 && (pushes.firstAttempts as number) >= (bridge.messages as number), JSON.stringify(pushes));
      assert.equal(pushes.requests, (pushes.firstAttempts as number) + (pushes.redeliveries as number));
      assert.ok((pushes.billedBytes as number) >= 1000 * pushes.requests, "at least Pub/Sub's minimum per request");
      assert.ok((pushes.billedMs as number) >= 100 * pushes.requests, "each push billed at least one 100 ms step");
      const cost = hasKeys(r.cost, ["usage", "perMillionChanges", "pod", "podMonthly", "breakEvenChangesPerSecond", "prices"], "cost");
      hasKeys(cost.usage, ["publishesPerChange", "pushesPerChange", "billedBytesPerRequest", "billedMsPerChange", "vcpu", "memoryGiB"], "cost.usage");
      assert.ok((cost.breakEvenChangesPerSecond as number) > 0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
