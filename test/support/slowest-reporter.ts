// A node:test reporter that runs beside `spec` and prints, at the end of a run, the ten slowest
// tests and how long each test file took (with the load average when it was reported), so the next
// slow test is seen the day it lands. Use:
//   node --test --test-reporter=spec --test-reporter-destination=stdout \
//        --test-reporter=./test/support/slowest-reporter.ts --test-reporter-destination=stdout …
import { loadavg } from "node:os";
import { relative } from "node:path";
import type { TestEvent } from "node:test/reporters";

const SHOWN = 10;

interface Timed {
  name: string;
  file: string;
  seconds: number;
  load?: string;
}

export default async function* slowestReporter(source: AsyncIterable<TestEvent>): AsyncGenerator<string> {
  const tests: Timed[] = [];
  const files: Timed[] = [];
  for await (const event of source) {
    // Each file ends with a summary of its own (one more, without a file, ends the run).
    if (event.type === "test:summary") {
      const { file, duration_ms } = event.data as { file?: string; duration_ms: number };
      if (file) files.push({ name: relative(process.cwd(), file), file, seconds: duration_ms / 1000, load: loadavg()[0]!.toFixed(1) });
      continue;
    }
    if (event.type !== "test:pass" && event.type !== "test:fail") continue;
    const { name, file, details } = event.data as { name: string; file?: string; details: { duration_ms: number; type?: string } };
    if (details.type === "suite") continue;
    tests.push({ name, file: file ? relative(process.cwd(), file) : "", seconds: details.duration_ms / 1000 });
  }
  const lines: string[] = [];
  if (tests.length > 0) {
    lines.push("", `slowest ${Math.min(SHOWN, tests.length)} of ${tests.length} tests:`);
    for (const t of tests.sort((a, b) => b.seconds - a.seconds).slice(0, SHOWN)) lines.push(`  ${t.seconds.toFixed(1).padStart(7)} s  ${t.name}  (${t.file})`);
  }
  if (files.length > 1) {
    // The runner reports files in the order they started, so "when" is when a file was reported.
    lines.push("", "test files by duration (load average, 1 min, when each was reported):");
    for (const f of files.sort((a, b) => b.seconds - a.seconds)) lines.push(`  ${f.seconds.toFixed(1).padStart(7)} s  ${f.name}  (load ${f.load})`);
  }
  yield `${lines.join("\n")}\n`;
}
