// Process entry of the bridge container (and of `node bridge/main.ts` in tests): its settings are
// the CRDFN_* environment variables (and CRDFN_CONFIG_FILE), never arguments. `crdfn bridge`
// (cli/bridge-command.ts) is the same process with flags for those settings, for a terminal.
import { EXIT_CODES, runBridgeProcess } from "./run.ts";

const args = process.argv.slice(2);
if (args.length > 0) {
  process.stderr.write(
    `crdfn bridge: the container takes no arguments (got ${args.join(" ")}); set CRDFN_* environment variables, or run \`crdfn bridge --help\` for flags\n`,
  );
  process.exit(EXIT_CODES.config);
}
process.exit(await runBridgeProcess({ env: process.env }));
