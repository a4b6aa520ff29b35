// The crdfn command line. Problems a person can fix are printed as one line, never a stack.
import { Command, CommanderError } from "commander";
import { SetupError } from "../emulator/errors.ts";
import { packageVersion } from "../emulator/paths.ts";
import { ConfigError } from "../core/config-error.ts";
import { bridgeCommand } from "../bridge/command.ts";
import { clusterCommand } from "./cluster.ts";
import { crdCommand } from "./crd.ts";
import { devCommand } from "./dev.ts";
import { dlqCommand } from "./dlq.ts";
import { generateCommand } from "./generate.ts";
import { statusCommand } from "./status.ts";

export function program(): Command {
  return new Command("crdfn")
    .description("Kubernetes operators whose reconcile logic runs as serverless functions")
    .version(packageVersion, "-V, --version", "print the crdfn version")
    .showHelpAfterError()
    .addCommand(devCommand())
    .addCommand(clusterCommand())
    .addCommand(bridgeCommand())
    .addCommand(statusCommand())
    .addCommand(dlqCommand())
    .addCommand(crdCommand())
    .addCommand(generateCommand());
}

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
