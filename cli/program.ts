// The crdfn command tree (without running it, so tests can read every command's help).
import { Command } from "commander";
import { packageVersion } from "../emulator/paths.ts";
import { bridgeCommand } from "./bridge-command.ts";
import { bundleCommand } from "./cloudrun-source.ts";
import { clusterCommand } from "./cluster.ts";
import { crdCommand } from "./crd.ts";
import { devCommand } from "./dev.ts";
import { diffCommand } from "./diff.ts";
import { dlqCommand } from "./dlq.ts";
import { generateCommand } from "./generate.ts";
import { initCommand } from "./init.ts";
import { replayCommand } from "./replay.ts";
import { resyncCommand } from "./resync.ts";
import { statusCommand } from "./status.ts";
import { testCommand } from "./test-command.ts";

export function program(): Command {
  return new Command("crdfn")
    .description("Kubernetes operators whose reconcile logic runs as serverless functions")
    .version(packageVersion, "-V, --version", "print the crdfn version")
    .showHelpAfterError()
    .addCommand(initCommand())
    .addCommand(devCommand())
    .addCommand(clusterCommand())
    .addCommand(bridgeCommand())
    .addCommand(statusCommand())
    .addCommand(dlqCommand())
    .addCommand(resyncCommand())
    .addCommand(crdCommand())
    .addCommand(diffCommand())
    .addCommand(replayCommand())
    .addCommand(generateCommand())
    .addCommand(bundleCommand())
    .addCommand(testCommand())
    .addHelpText("after", "\nExamples:\n  $ npx crdfn init my-operator   # a new operator project\n  $ crdfn dev --help");
}
