// What the commands take from where they run: the `.crdfn/env` that `crdfn dev` / `crdfn cluster
// up` write (written and read here; an SQS client from such an environment: clients/sqs-client.ts;
// cli/admin/admin-target.ts decides which queues the admin commands look at), and kubectl's
// default kubeconfig.
import { existsSync, readFileSync } from "node:fs";
import { homedir } from "node:os";
import { delimiter, join } from "node:path";

/** `.crdfn/env`: sourceable by a shell and readable by dotenv-style loaders. */
export function envFile(env: Record<string, string>): string {
  return Object.entries(env)
    .map(([k, v]) => `${k}=${v}`)
    .join("\n")
    .concat("\n");
}

/** A `.crdfn/env` as written by envFile (a line that is not KEY=value is passed over). */
export function readEnvFile(path: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of readFileSync(path, "utf8").split("\n")) {
    const m = /^([A-Z_][A-Z0-9_]*)=(.*)$/.exec(line.trim());
    if (m) out[m[1]!] = m[2]!;
  }
  return out;
}

/** The environment, over the `.crdfn/env` in `stateDir` when there is one. */
export function adminEnv(stateDir: string): NodeJS.ProcessEnv {
  const file = join(stateDir, "env");
  return { ...(existsSync(file) ? readEnvFile(file) : {}), ...process.env };
}

/** kubectl's default: the first file of KUBECONFIG, else ~/.kube/config. */
export function defaultKubeconfig(env: NodeJS.ProcessEnv = process.env): string {
  return env.KUBECONFIG?.split(delimiter).find((p) => p) ?? join(homedir(), ".kube", "config");
}
