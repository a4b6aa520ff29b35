// A node:test reporter that runs beside `spec` and prints, at the end of a run, the ten slowest
// tests and how long each test file took (with the load average when it finished), so the next
// slow test is seen the day it lands. Use:
//   node --test --test-reporter=spec --test-reporter-destination=stdout \
//        --test-reporter=./test/support/slowest-reporter.ts --test-reporter-destination=stdout …
import { loadavg } from "node:os";
import { basename, relative } from "node:path";
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
    if (event.type !== "test:pass" && event.type !== "test:fail" && event.type !== "test:complete") continue;
    const { name, file, details } = event.data as { name: string; file?: string; details: { duration_ms: number; type?: string } };
    const seconds = details.duration_ms / 1000;
    const where = file ? relative(process.cwd(), file) : "";
    // With process isolation each file is reported once more, as a test:complete named after the file.
    if (event.type === "test:complete") {
      if (file && name === basename(file) && event.data.nesting === 0) files.push({ name: where, file: where, seconds, load: loadavg()[0]!.toFixed(1) });
      continue;
    }
    if (details.type === "suite") continue;
    tests.push({ name, file: where, seconds });
  }
  const lines: string[] = [];
  if (tests.length > 0) {
    lines.push("", `slowest ${Math.min(SHOWN, tests.length)} of ${tests.length} tests:`);
    for (const t of tests.sort((a, b) => b.seconds - a.seconds).slice(0, SHOWN)) lines.push(`  ${t.seconds.toFixed(1).padStart(7)} s  ${t.name}  (${t.file})`);
  }
  if (files.length > 1) {
    lines.push("", `test files by duration (load average, 1 min, when each ended):`);
    for (const f of files.sort((a, b) => b.seconds - a.seconds)) lines.push(`  ${f.seconds.toFixed(1).padStart(7)} s  ${f.name}  (load ${f.load})`);
  }
  yield `${lines.join("\n")}\n`;
}
