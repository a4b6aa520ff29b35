// `crdfn bridge`: the same bridge that runs in the cluster, run locally against a kubeconfig.
// Options are overrides of the CRDFN_* environment variables they name.
import { Command } from "commander";
import { envVariableNames } from "../bridge/config.ts";
import { runBridgeProcess } from "../bridge/run.ts";

const overrides: ReadonlyArray<[flag: string, env: string, help: string]> = [
  ["--config <file>", "CRDFN_CONFIG_FILE", "YAML/JSON settings file (environment variables win over it)"],
  ["--cluster <name>", "CRDFN_CLUSTER", "cluster name put in every event"],
  ["--queue-url <url>", "CRDFN_QUEUE_URL", "SQS queue URL"],
  ["--pubsub-topic <name>", "CRDFN_PUBSUB_TOPIC", "or a Pub/Sub topic, projects/<project>/topics/<topic>"],
  ["--resources <list>", "CRDFN_RESOURCES", 'e.g. "stable.example.com/v1/crontabs>batch/v1/cronjobs"'],
  ["--namespaces <list>", "CRDFN_NAMESPACES", "comma-separated; default all"],
  ["--label-selector <selector>", "CRDFN_LABEL_SELECTOR", "only watched resources with these labels"],
  ["--resync-seconds <n>", "CRDFN_RESYNC_SECONDS", "re-announce every object this often, spread over the period; 0 = off (default)"],
  ["--http-port <port>", "CRDFN_HTTP_PORT", "port of /healthz, /readyz, /metrics"],
  ["--lease-name <name>", "CRDFN_LEASE_NAME", "enable leader election on this Lease"],
  ["--lease-namespace <ns>", "CRDFN_LEASE_NAMESPACE", "namespace of the Lease"],
  ["--log-level <level>", "CRDFN_LOG_LEVEL", "trace | debug | info | warn | error"],
];

export function bridgeCommand(): Command {
  const cmd = new Command("bridge")
    .description("Watch custom resources and publish a key event for every change to SQS or Pub/Sub")
    .option("--kubeconfig <path>", "kubeconfig file (default: in-cluster, else $KUBECONFIG or ~/.kube/config)")
    .option("--context <name>", "kubeconfig context");
  for (const [flag, env, help] of overrides) cmd.option(flag, `${help} [${env}]`);
  cmd.addHelpText(
    "after",
    `\nEnvironment: ${envVariableNames.join(", ")}, CRDFN_CONFIG_FILE\n` +
      "\nExamples:\n  $ set -a; . .crdfn/env; set +a; crdfn bridge   # against crdfn cluster up\n" +
      "  $ crdfn bridge --kubeconfig ~/.kube/config --context prod --log-level info",
  );
  cmd.action(async (opts: Record<string, string | undefined>) => {
    const env: NodeJS.ProcessEnv = { ...process.env };
    for (const [flag, name] of overrides) {
      const key = flag.slice(2, flag.indexOf(" ")).replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());
      const value = opts[key];
      if (value !== undefined) env[name] = value;
    }
    process.exitCode = await runBridgeProcess({ env, kubeconfig: opts.kubeconfig, context: opts.context });
  });
  return cmd;
}
