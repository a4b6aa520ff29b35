// `npm run bench:peers --quick` end to end: builds the peers, runs all five systems with tiny
// numbers on one cluster and writes every field. Skipped, saying why, without Go or Python.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { missingToolchains } from "../bench/peers/build.ts";
import { METRICS } from "../bench/peers/report.ts";
import { SYSTEMS } from "../bench/peers/systems.ts";
import { packageRoot } from "../emulator/paths.ts";

const run = promisify(execFile);
const missing = missingToolchains();

const latencyKeys = ["samples", "p50Ms", "p95Ms", "p99Ms", "maxMs", "meanMs"];
const costKeys = [
  "cpuSeconds",
  "clusterSideCpuMsPerChange",
  "controlPlaneCpuMsPerChange",
  "operatorCpuMsPerChange",
  "offClusterCpuMsPerChange",
  "driverCpuMsPerChange",
  "apiRequestsPerChange",
  "requests",
  "machineBusyPercent",
];

function hasKeys(o: unknown, keys: readonly string[], where: string): Record<string, unknown> {
  assert.ok(typeof o === "object" && o !== null, `${where} is an object`);
  const rec = o as Record<string, unknown>;
  for (const k of keys) assert.ok(k in rec, `${where}.${k} is present`);
  return rec;
}

describe("npm run bench:peers (smoke)", { timeout: 600_000 }, () => {
  it(
    "--quick runs every system and writes a complete JSON",
    { skip: missing.length ? `needs ${missing.join(" and ")}` : false, timeout: 600_000 },
    async () => {
      const dir = mkdtempSync(join(tmpdir(), "crdfn-peers-smoke-"));
      try {
        const json = join(dir, "out.json");
        const { stdout } = await run(process.execPath, ["--conditions=crdfn-source", "bench/peers/main.ts", "--quick", "--json", json], {
          cwd: packageRoot,
          maxBuffer: 16 * 1024 * 1024,
        });
        assert.match(stdout, /crdfn ÷ peer/);
        const result = hasKeys(
          JSON.parse(readFileSync(json, "utf8")),
          ["startedAt", "finishedAt", "machine", "quiet", "params", "builds", "runs", "medians", "ratios"],
          "result",
        );
        hasKeys(result.quiet, ["maxLoad", "quiet", "waitedSeconds", "loadAvg"], "quiet");
        const builds = hasKeys(result.builds, ["controllerRuntime", "kopf"], "builds");
        hasKeys((builds.controllerRuntime as Record<string, unknown>).versions, ["go", "sigs.k8s.io/controller-runtime"], "controller-runtime versions");
        hasKeys((builds.kopf as Record<string, unknown>).versions, ["python", "kopf"], "kopf versions");

        const runs = result.runs as Record<string, unknown>[];
        assert.deepEqual(new Set(runs.map((r) => r.system)), new Set(SYSTEMS), "one run of every system");
        for (const r of runs) {
          const where = String(r.system);
          hasKeys(
            r,
            [
              "round",
              "namespace",
              "loadAvgStart",
              "loadAvgEnd",
              "startSeconds",
              "settings",
              "bridgePublishDelayMs",
              "setup",
              "rated",
              "closedLoop",
              "rawCeiling",
              "closedToRaw",
              "peakRssMiB",
              "clusterSidePeakRssMiB",
              "offClusterPeakRssMiB",
            ],
            where,
          );
          const setup = hasKeys(r.setup, ["objects", "createSeconds", "allReadySeconds", ...costKeys], `${where}.setup`);
          const rated = hasKeys(r.rated, ["ratePerSecond", "writes", "writeErrors", "unobserved", "latency", ...costKeys], `${where}.rated`);
          const closed = hasKeys(
            r.closedLoop,
            ["concurrency", "changes", "changesPerSecond", "writeErrors", "unobserved", "latency", ...costKeys],
            `${where}.closedLoop`,
          );
          const raw = hasKeys(r.rawCeiling, ["patches", "errors", "patchesPerSecond", "latency"], `${where}.rawCeiling`);
          for (const l of [rated.latency, closed.latency, raw.latency]) hasKeys(l, latencyKeys, `${where} latency`);
          assert.equal(setup.objects, 20);
          assert.equal(closed.unobserved, 0, `${where}: every closed-loop change observed`);
          assert.ok((closed.changesPerSecond as number) > 0, `${where}: changes/s > 0`);
          assert.ok((raw.patchesPerSecond as number) > 0, `${where}: raw patches/s > 0`);
          // A reconcile reads nothing from the API server in the peers (cache) and a few things in crdfn: a handful of requests.
          const requests = closed.apiRequestsPerChange as number;
          assert.ok(requests >= 1 && requests < 20, `${where}: ${requests} API requests per change`);
          assert.ok((closed.clusterSideCpuMsPerChange as number) > 0, `${where}: cluster-side CPU measured`);
          assert.ok((r.clusterSidePeakRssMiB as number) > 5, `${where}: its peak RSS measured`);
          const offCluster = closed.offClusterCpuMsPerChange as number;
          if (r.system === "crdfn") assert.ok(offCluster > 0, "crdfn: off-cluster CPU measured");
          else assert.equal(offCluster, 0, `${where}: nothing off the cluster`);
        }
        const ratios = result.ratios as Record<string, Record<string, number | null>>;
        assert.deepEqual(Object.keys(ratios).sort(), SYSTEMS.filter((s) => s !== "crdfn").sort());
        for (const [peer, byMetric] of Object.entries(ratios)) for (const m of METRICS) assert.ok(m.name in byMetric, `${peer}: ratio ${m.name}`);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  );
});
