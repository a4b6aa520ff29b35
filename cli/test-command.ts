// `crdfn test`: a project's unit tests on Node's own test runner, which passes when it finds no
// test at all (`node --test` on a Node that cannot run .ts files finds none and exits 0). This
// runs the same runner on the project's *.test.ts (or .js) files and fails when no test ran.
import { readdirSync } from "node:fs";
import { join, relative, resolve } from "node:path";
import { finished } from "node:stream/promises";
import { run } from "node:test";
import { spec } from "node:test/reporters";
import { Command } from "commander";
import { SetupError } from "../emulator/errors.ts";

const TEST_FILE = /\.test\.(ts|mts|cts|js|mjs|cjs)$/;

/** Test files under `dir`, leaving out node_modules and hidden folders (.crdfn, .serverless, .git). */
export function testFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((d) => {
    if (d.name === "node_modules" || d.name.startsWith(".")) return [];
    const path = join(dir, d.name);
    if (d.isDirectory()) return testFiles(path);
    return d.isFile() && TEST_FILE.test(d.name) ? [path] : [];
  });
}

interface TestEvent {
  name: string;
  file?: string;
  skip?: unknown;
  todo?: unknown;
  details?: { type?: string };
}

/** A test of the project, not a suite, a skipped one, or a file the runner reports for having none. */
const ranATest = (d: TestEvent): boolean => d.details?.type !== "suite" && !d.skip && !d.todo && d.name !== d.file;

/** Runs the files; resolves to how many tests ran and how many failed. */
export async function runTests(files: string[], out: NodeJS.WritableStream): Promise<{ ran: number; failed: number }> {
  let ran = 0;
  let failed = 0;
  const stream = run({ files });
  stream.on("test:pass", (d: TestEvent) => void (ran += ranATest(d) ? 1 : 0));
  stream.on("test:fail", (d: TestEvent) => {
    failed += 1;
    ran += ranATest(d) ? 1 : 0;
  });
  const report = stream.compose(spec);
  report.pipe(out, { end: false });
  await finished(report, { writable: false });
  return { ran, failed };
}

export function testCommand(): Command {
  return new Command("test")
    .description("run the project's tests (*.test.ts and *.test.js, node_modules left out) with Node's test runner; fail when none ran")
    .argument("[files...]", "test files or folders (default: the current folder)")
    .addHelpText("after", "\nExamples:\n  $ crdfn test                      # npm test in a project crdfn init made\n  $ crdfn test operator.test.ts")
    .action(async (args: string[]) => {
      const files = (args.length ? args : ["."]).flatMap((a) => (TEST_FILE.test(a) ? [resolve(a)] : testFiles(resolve(a))));
      if (files.length === 0) throw new SetupError(`test: no test file (*.test.ts or *.test.js) in ${args.join(", ") || "this folder"}`);
      const { ran, failed } = await runTests(files, process.stdout);
      if (failed > 0) process.exitCode = 1;
      else if (ran === 0) {
        console.error(`crdfn: test: no test ran in ${files.map((f) => relative(process.cwd(), f)).join(", ")}: a project's tests must test something`);
        process.exitCode = 1;
      }
    });
}
