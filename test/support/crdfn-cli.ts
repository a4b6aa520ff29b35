// The crdfn command run as a person runs it: its own process, from the checkout's sources, in a
// folder and environment of the test's choosing; a non-zero exit is a result, not a throw.
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { packageRoot } from "../../emulator/paths.ts";

const run = promisify(execFile);
const main = join(packageRoot, "cli", "main.ts");

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

export async function runCrdfn(args: readonly string[], o: { cwd: string; env: NodeJS.ProcessEnv }): Promise<CliResult> {
  try {
    const r = await run(process.execPath, ["--conditions=crdfn-source", main, ...args], { cwd: o.cwd, env: o.env });
    return { code: 0, ...r };
  } catch (e) {
    const r = e as CliResult;
    return { code: r.code, stdout: r.stdout, stderr: r.stderr };
  }
}
