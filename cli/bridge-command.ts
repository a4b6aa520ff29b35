// `crdfn bridge`: the same bridge that runs in the cluster, run locally against a kubeconfig.
// Options are overrides of the CRDFN_* environment variables they name.
import { Command } from "commander";
import { envVariableNames } from "../bridge/config.ts";
import { runBridgeProcess } from "../bridge/run.ts";

/** Each flag and its help; it overrides the environment variable envOf names. */
const overrides: Readonly<Record<string, string>> = {
  "--config <file>": "YAML/JSON settings file (environment variables win over it)",
  "--cluster <name>": "cluster name put in every event",
  "--queue-url <url>": "SQS queue URL",
  "--pubsub-topic <name>": "or a Pub/Sub topic, projects/<project>/topics/<topic>",
  "--resources <list>": 'e.g. "stable.example.com/v1/crontabs>batch/v1/cronjobs"',
  "--namespaces <list>": "comma-separated; default all",
  "--label-selector <selector>": "only watched resources with these labels",
  "--resync-seconds <n>": "re-announce every object this often, spread over the period; 0 = off (default)",
  "--http-port <port>": "port of /healthz, /readyz, /metrics",
  "--lease-name <name>": "enable leader election on this Lease",
  "--lease-namespace <ns>": "namespace of the Lease",
  "--log-level <level>": "trace | debug | info | warn | error",
};

/** "--queue-url <url>": "queue-url". */
const nameOf = (flag: string): string => flag.slice(2, flag.indexOf(" "));

/** CRDFN_ and the flag's name (--queue-url: CRDFN_QUEUE_URL); --config sets CRDFN_CONFIG_FILE. */
function envOf(flag: string): string {
  const name = nameOf(flag);
  return name === "config" ? "CRDFN_CONFIG_FILE" : `CRDFN_${name.toUpperCase().replace(/-/g, "_")}`;
}

export function bridgeCommand(): Command {
  const cmd = new Command("bridge")
    .description("Watch custom resources and publish a key event for every change to SQS or Pub/Sub")
    .option("--kubeconfig <path>", "kubeconfig file (default: in-cluster, else $KUBECONFIG or ~/.kube/config)")
    .option("--context <name>", "kubeconfig context");
  for (const [flag, help] of Object.entries(overrides)) cmd.option(flag, `${help} [${envOf(flag)}]`);
  cmd.addHelpText(
    "after",
    `\nEnvironment: ${envVariableNames.join(", ")}, CRDFN_CONFIG_FILE\n` +
      "\nExamples:\n  $ set -a; . .crdfn/env; set +a; crdfn bridge   # against crdfn cluster up\n" +
      "  $ crdfn bridge --kubeconfig ~/.kube/config --context prod --log-level info",
  );
  cmd.action(async (opts: Record<string, string | undefined>) => {
    const env: NodeJS.ProcessEnv = { ...process.env };
    for (const flag of Object.keys(overrides)) {
      const key = nameOf(flag).replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());
      const value = opts[key];
      if (value !== undefined) env[envOf(flag)] = value;
    }
    process.exitCode = await runBridgeProcess({ env, kubeconfig: opts.kubeconfig, context: opts.context });
  });
  return cmd;
}
