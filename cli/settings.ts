// The `.crdfn/env` that `crdfn dev` / `crdfn cluster up` write (an SQS client from such an
// environment: clients/sqs-client.ts; cli/admin-target.ts decides which queues the admin commands look at).
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";

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
