// `npm run test:integration`: every test/*.test.ts but the benchmark smokes (npm run test:bench),
// or the files named on the command line, through node:test's run() with the shared servers'
// global setup, three files at a time, the spec reporter and the slowest reporter.
//
// Why not `node --test` itself: it runs files in alphabetical order, and the longest files
// (package-install, one-reconcile-per-object, queue-dev) started last, so the run's last minutes
// had one or two files left in three lanes. Here the longest known files start first and the
// short ones fill in around them. LONGEST_FIRST is kept true by the per-file table the slowest
// reporter prints at the end of every run; a file missing from it only starts in name order.
import { globSync } from "node:fs";
import { basename } from "node:path";
import { PassThrough, Readable } from "node:stream";
import { run } from "node:test";
import { spec, type TestEvent } from "node:test/reporters";
import { LANES } from "./shared-servers.ts";
import slowestReporter from "./slowest-reporter.ts";

/** The longest files of a run, longest first (seconds on 2 cores, nothing beside: 60–100). */
const LONGEST_FIRST = [
  "readme-commands",
  "package-install",
  "trace-viewer",
  "bridge-start-work",
  "stale-snapshots",
  "api-server-hang",
  "diff-replay",
  "dev-projects",
  "one-reconcile-per-object",
  "slow-reconcile",
  "cloudrun-attempts",
  "incarnations",
  "event-auth",
  "deploy-lint",
  "harness-lifecycle",
  "bridge-failover",
  "functions-outage",
  "bridge-outage",
  "queue-dev",
  "bridge-restart",
  "cloudrun-pipeline",
  "multi-cluster",
  "cli-dev",
  "cli-dev-existing",
];

const rank = (file: string): number => {
  const i = LONGEST_FIRST.indexOf(basename(file, ".test.ts"));
  return i === -1 ? LONGEST_FIRST.length : i;
};
const named = process.argv.slice(2);
const files = (named.length > 0 ? named : globSync("test/*.test.ts").filter((f) => !basename(f).startsWith("bench-"))).sort(
  (a, b) => rank(a) - rank(b) || a.localeCompare(b),
);

// globalSetupPath: Node 24's run() takes it (as --test-global-setup); @types/node does not list it
// yet, so the options go through a variable (a literal would be refused as an unknown property).
// One file per lane (a control plane of its own at a time); most of a file's time is waiting (a
// lease, a timer, a server coming back), so 3 lanes suit 2 cores.
const options = { files, concurrency: LANES, globalSetupPath: "./test/support/shared-servers.ts" };
const events = run(options);
events.on("test:summary", (data: { file?: string; success: boolean }) => {
  // The run's own summary (the one without a file) decides the exit code, as `node --test` does.
  if (data.file === undefined && !data.success) process.exitCode = 1;
});
const forSlowest = new PassThrough({ objectMode: true });
events.pipe(forSlowest);
events.pipe(new spec()).pipe(process.stdout, { end: false });
Readable.from(slowestReporter(forSlowest as AsyncIterable<TestEvent>)).pipe(process.stdout, { end: false });
