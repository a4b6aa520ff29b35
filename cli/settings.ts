// The `.crdfn/env` that `crdfn dev` / `crdfn cluster up` write, and an SQS client from such an
// environment (cli/admin-target.ts decides which queues the admin commands look at).
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { SQSClient } from "@aws-sdk/client-sqs";

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

/** The SDK reads region, endpoint (AWS_ENDPOINT_URL_SQS) and credentials from this env. */
export function sqsFrom(env: NodeJS.ProcessEnv): SQSClient {
  const endpoint = env.AWS_ENDPOINT_URL_SQS;
  const local = env.AWS_ACCESS_KEY_ID && env.AWS_SECRET_ACCESS_KEY ? { accessKeyId: env.AWS_ACCESS_KEY_ID, secretAccessKey: env.AWS_SECRET_ACCESS_KEY } : undefined;
  return new SQSClient({
    region: env.AWS_REGION ?? "us-east-1",
    ...(endpoint ? { endpoint } : {}),
    ...(local ? { credentials: local } : {}),
  });
}
