import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { platformKind, platformObjectName } from "./kinds.ts";
import { operatorArgs } from "./systems.ts";
import { checkBars, formatPlatformReport, formatTracedPlatform } from "./report.ts";
import type { PlatformRun } from "./run.ts";

const latency = (p50Ms: number) => ({ samples: 100, p50Ms, p95Ms: p50Ms * 2, p99Ms: p50Ms * 3, maxMs: p50Ms * 4, meanMs: p50Ms });

function run(
  system: PlatformRun["system"],
  o: { peak: number; idle: number; requests: number; p50: number; watches: number; queue: number | null; unobserved?: number },
): PlatformRun {
  return {
    system,
    traced: false,
    stages: null,
    namespace: `platform-${system}`,
    startedAt: "2026-11-25T07:00:00.000Z",
    loadAvgStart: [1, 2, 3],
    loadAvgEnd: [4, 5, 6],
    startSeconds: 1,
    settings: {},
    setup: { kinds: 10, objects: 10_000, createSeconds: 30, allReadySeconds: 60 },
    watches: { samples: 3, median: o.watches, min: o.watches, max: o.watches + 1, baseline: 25, byResource: { configmaps: 1 } },
    idle: {
      seconds: 300,
      settleSeconds: 2,
      cpuSeconds: {},
      clusterSideCpuPercent: o.idle,
      offClusterCpuPercent: 1,
      controlPlaneCpuPercent: 3,
      apiRequests: 40,
      loadAvg: [1, 1, 1],
    },
    rss: { clusterSidePeakMiB: o.peak, clusterSideIdleMiB: o.peak - 10, offClusterPeakMiB: system === "crdfn" ? 200 : 0, peakMiB: {} },
    rated: {
      cpuMsPerChangeByProcess: {},
      ratePerSecond: 50,
      seconds: 30,
      writes: 1500,
      writeErrors: 0,
      unobserved: o.unobserved ?? 0,
      observedPerSecond: 50,
      latency: latency(o.p50),
      clusterSideCpuMsPerChange: 1,
      controlPlaneCpuMsPerChange: 5,
      offClusterCpuMsPerChange: system === "crdfn" ? 8 : 0,
      apiRequestsPerChange: o.requests,
      requests: {},
      serverMsPerRequest: { "APPLY configmaps": 4.2 },
      queueRequests: o.queue === null ? null : { "bridge SendMessageBatch": 500, ReceiveMessage: 400, DeleteMessageBatch: 300 },
      queueRequestsPerChange: o.queue,
      pipeline: o.queue === null ? null : { reconciles: 1500, functionMsPerReconcile: 40, bridgePublishDelayMs: 12 },
      loadAvg: [2, 2, 2],
    },
  };
}

describe("bench:platform's bars", () => {
  const cr = run("controller-runtime", { peak: 400, idle: 0.4, requests: 2, p50: 20, watches: 20, queue: null });

  it("pass where crdfn meets each of the bars of docs/performance.md", () => {
    const bars = checkBars(run("crdfn", { peak: 100, idle: 0.1, requests: 2.05, p50: 29, watches: 11, queue: 0.8 }), cr);
    assert.deepEqual(
      bars.map((b) => [b.name, b.pass]),
      [
        ["cluster-side RSS, peak (MiB)", true],
        ["idle CPU, cluster side (% of a core)", true],
        ["API requests per change", true],
        ["p50 change → child and status Ready (ms)", true],
        ["watches held open on the API server", true],
        ["SQS requests per change at 50/s, sustained", true],
      ],
    );
    assert.equal(bars[0]?.ratio, "0.25×");
  });

  it("miss where it does not: more memory, busier idle, more requests, slower, as many watches, a lost change", () => {
    const bars = checkBars(run("crdfn", { peak: 130, idle: 0.3, requests: 2.2, p50: 31, watches: 20, queue: 0.8, unobserved: 1 }), cr);
    assert.deepEqual(
      bars.map((b) => b.pass),
      [false, false, false, false, false, false],
    );
  });

  it("SQS: more than one request per change misses even with nothing lost", () => {
    const bars = checkBars(run("crdfn", { peak: 100, idle: 0.1, requests: 2, p50: 20, watches: 11, queue: 1.2 }), cr);
    assert.equal(bars.at(-1)?.pass, false);
  });

  it("idle CPU both at zero is no worse", () => {
    const zero = run("controller-runtime", { peak: 400, idle: 0, requests: 2, p50: 20, watches: 20, queue: null });
    assert.equal(checkBars(run("crdfn", { peak: 100, idle: 0, requests: 2, p50: 20, watches: 11, queue: 1 }), zero)[1]?.pass, true);
  });

  it("the report prints the bars, both systems' measures, the queue's requests by kind and the load averages", () => {
    const text = formatPlatformReport(run("crdfn", { peak: 100, idle: 0.1, requests: 2, p50: 20, watches: 11, queue: 0.8 }), cr);
    assert.match(text, /\| cluster-side RSS, peak \(MiB\) +\| ≤ 0\.3× +\| 100\.0 +\| 400\.0 +\| 0\.25× +\| PASS \|/);
    assert.match(text, /bridge SendMessageBatch 0\.33, ReceiveMessage 0\.27, DeleteMessageBatch 0\.20/);
    assert.match(text, /1\.00 2\.00 3\.00 \/ 2\.00 2\.00 2\.00 \/ 4\.00 5\.00 6\.00/);
    assert.match(text, /controller-runtime \(10 processes\)/);
    assert.match(text, /1500 \/ 40\.0 ms \/ 12\.0 ms/);
    assert.match(text, /mean ms per request +\| APPLY configmaps 4\.2 /);
  });

  it("crdfn traced beside untraced: its stages, and tracing's cost in the bridge's and the function process's CPU per change", () => {
    const off = run("crdfn", { peak: 100, idle: 0.1, requests: 2, p50: 20, watches: 11, queue: 0.8 });
    off.rated.cpuMsPerChangeByProcess = { bridge: 1, functions: 3, apiServer: 9 };
    const on = { ...run("crdfn", { peak: 100, idle: 0.1, requests: 2, p50: 22, watches: 11, queue: 0.8 }), traced: true };
    on.rated.cpuMsPerChangeByProcess = { bridge: 1.5, functions: 3.5, apiServer: 9 };
    const text = formatTracedPlatform(off, on);
    assert.match(text, /no spans collected/);
    assert.match(text, /^off +\| +100 \| +4\.0 \| +20\.0$/m);
    assert.match(text, /^on − off .*\+25 % \| +\+10 %$/m);
  });
});

describe("bench:platform's kinds", () => {
  it("each kind its own plural, child label and object names, so ten share a namespace without collisions", () => {
    const [a, b] = [platformKind(0), platformKind(7)];
    assert.deepEqual(a, {
      group: "bench.crdfn.dev",
      version: "v1",
      kind: "Greeting0",
      plural: "greeting0s",
      childLabel: "bench.crdfn.dev/greeting0",
      prefix: "g0",
    });
    assert.equal(platformObjectName(b, 42), "g7-00042");
    assert.notEqual(platformObjectName(a, 42), platformObjectName(b, 42));
  });

  it("a controller-runtime process is pointed at its kind and caches only its own ConfigMaps", () => {
    const args = operatorArgs(platformKind(3), "ns");
    const flag = (name: string) => args[args.indexOf(name) + 1];
    assert.equal(flag("--kind"), "Greeting3");
    assert.equal(flag("--group"), "bench.crdfn.dev");
    assert.equal(flag("--child-label"), "bench.crdfn.dev/greeting3");
    assert.ok(args.includes("--cache-children-by-label"));
  });
});
