// What the benches' command lines share: whole-number options, and a run that ends a failure in
// one line naming the bench (never a stack trace alone).
import { InvalidArgumentError, type Command } from "commander";

/** `--queue-in-memory`'s help, the same wherever a benchmark takes it (docs/performance.md, "The local queue's cost by depth"). */
export const QUEUE_IN_MEMORY_HELP =
  "run ElasticMQ, crdfn's stand-in for SQS, without its H2 message store (as crdfn dev runs it: on disk), about 60 % of its CPU per message; SQS's durability costs no machine of yours";

/** A commander option parser for a whole number ≥ 1; `flag` names the option in the error. */
export const wholeNumber =
  (flag: string) =>
  (text: string): number => {
    const n = Number(text);
    if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError(`${flag} must be a whole number ≥ 1`);
    return n;
  };

/** Parses the process's arguments with `command`; a failure is one line, `<name>: <message>`, and exit code 1. */
export async function runBench(name: string, command: Command): Promise<void> {
  try {
    await command.parseAsync(process.argv);
  } catch (e) {
    console.error(`${name}: ${e instanceof Error ? e.message : String(e)}`);
    process.exitCode = 1;
  }
}

/**
 * The action of a bench that says its progress on stderr and returns its report and where it wrote
 * its results; `given(k)`: whether option `k` came from the command line (not a default).
 */
export const printReport =
  <O>(run: (o: O, say: (line: string) => void, given: (k: string) => boolean) => Promise<{ path: string; report: string }>) =>
  async (o: O, cmd: Command): Promise<void> => {
    const { path, report } = await run(
      o,
      (line) => console.error(line),
      (k) => cmd.getOptionValueSource(k) === "cli",
    );
    console.log(report);
    console.log(`\nresults: ${path}`);
  };
