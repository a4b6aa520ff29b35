// The crdfn command tree (without running it, so tests can read every command's help).
import { Command } from "commander";
import { packageVersion } from "../emulator/paths.ts";
import { bridgeCommand } from "./bridge-command.ts";
import { bundleCommand } from "./generate/bundle-command.ts";
import { clusterCommand } from "./cluster-command.ts";
import { crdCommand } from "./generate/crd.ts";
import { devCommand } from "./dev-command.ts";
import { diffCommand } from "./admin/diff.ts";
import { dlqCommand } from "./admin/dlq.ts";
import { generateCommand } from "./generate/generate.ts";
import { initCommand } from "./generate/init.ts";
import { keyCommand } from "./key-command.ts";
import { repairCommand } from "./admin/repair.ts";
import { replayCommand } from "./admin/replay.ts";
import { resyncCommand } from "./admin/resync.ts";
import { statusCommand } from "./admin/status.ts";
import { testCommand } from "./test-command.ts";
import { traceCommand } from "./admin/trace.ts";

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
    .addCommand(repairCommand())
    .addCommand(traceCommand())
    .addCommand(keyCommand())
    .addCommand(generateCommand())
    .addCommand(bundleCommand())
    .addCommand(testCommand())
    .addHelpText("after", "\nExamples:\n  $ npx crdfn init my-operator   # a new operator project\n  $ crdfn dev --help");
}
