// `npm run bench:platform --quick` end to end: builds the Go operator, runs crdfn (one bridge for
// ten kinds) and ten controller-runtime operators with tiny numbers on one cluster, and writes
// every measure of docs/performance.md's platform table. Skipped, saying why, without Go.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { missingToolchains } from "../bench/peers/build.ts";
import type { PlatformRun } from "../bench/platform/run.ts";
import type { Bar } from "../bench/platform/report.ts";
import { packageRoot } from "../emulator/paths.ts";

const run = promisify(execFile);
const missing = missingToolchains().filter((m) => m.startsWith("go"));

describe("npm run bench:platform (smoke)", { timeout: 600_000 }, () => {
  it(
    "--quick runs both systems over ten kinds and writes every measure",
    { skip: missing.length ? `needs ${missing.join(" and ")}` : false, timeout: 600_000 },
    async () => {
      const dir = mkdtempSync(join(tmpdir(), "crdfn-platform-smoke-"));
      try {
        const json = join(dir, "out.json");
        const { stdout } = await run(process.execPath, ["--conditions=crdfn-source", "bench/platform.ts", "--quick", "--json", json], {
          cwd: packageRoot,
          maxBuffer: 16 * 1024 * 1024,
        });
        assert.match(stdout, /cluster-side RSS, peak/);
        const result = JSON.parse(readFileSync(json, "utf8")) as { runs: PlatformRun[]; bars: Bar[]; params: { kinds: number; objectsPerKind: number } };
        assert.deepEqual(
          result.runs.map((r) => r.system),
          ["crdfn", "controller-runtime"],
        );
        assert.equal(result.bars.length, 6);
        for (const r of result.runs) {
          const where = r.system;
          assert.equal(r.setup.objects, result.params.kinds * result.params.objectsPerKind, `${where}: every object created and Ready`);
          assert.equal(r.rated.unobserved, 0, `${where}: every change observed`);
          assert.ok(r.rss.clusterSidePeakMiB > 5, `${where}: cluster-side RSS measured`);
          // The system's watches: crdfn's bridge one per kind and one for the ConfigMaps; a controller-runtime process two.
          assert.ok(r.watches.median >= result.params.kinds, `${where}: ${r.watches.median} watches held`);
          const requests = r.rated.apiRequestsPerChange;
          assert.ok(requests >= 1 && requests < 20, `${where}: ${requests} API requests per change`);
          if (r.system === "crdfn") {
            assert.ok((r.rated.queueRequestsPerChange ?? 0) > 0, "crdfn: queue requests counted");
            assert.ok((r.rated.queueRequests?.["bridge SendMessageBatch"] ?? 0) > 0, "crdfn: the bridge's sends counted");
          } else {
            assert.equal(r.rated.queueRequests, null);
            assert.equal(Object.keys(r.rss.peakMiB).filter((k) => k.startsWith("op")).length, result.params.kinds, "one operator process per kind");
            // As deployed, as crdfn's bridge and functions are: a ServiceAccount, not the admin.
            assert.match(String(r.settings.identity), /^ServiceAccount crdfn-peers\/controller-runtime-greeting0s, ClusterRole /);
          }
        }
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  );
});
