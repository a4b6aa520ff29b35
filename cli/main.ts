// The crdfn command line. Problems a person can fix are printed as one line, never a stack.
import { CommanderError } from "commander";
import { SetupError } from "../emulator/errors.ts";
import { ConfigError } from "../core/config-error.ts";
import { program } from "./program.ts";

async function main(argv: string[]): Promise<void> {
  try {
    await program().exitOverride().parseAsync(argv);
  } catch (e) {
    if (e instanceof CommanderError) process.exit(e.exitCode);
    if (e instanceof SetupError || e instanceof ConfigError) {
      console.error(`crdfn: ${e.message}`);
      process.exit(2);
    }
    throw e;
  }
}

await main(process.argv);
