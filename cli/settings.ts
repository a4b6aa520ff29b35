// Where the admin commands find the queue and the cluster: the environment, else the
// `.crdfn/env` that `crdfn dev` / `crdfn cluster up` wrote.
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { SQSClient } from "@aws-sdk/client-sqs";
import { SetupError } from "../emulator/errors.ts";

export function readEnvFile(path: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of readFileSync(path, "utf8").split("\n")) {
    const m = /^([A-Z_][A-Z0-9_]*)=(.*)$/.exec(line.trim());
    if (m) out[m[1]!] = m[2]!;
  }
  return out;
}

export function adminEnv(stateDir: string): NodeJS.ProcessEnv {
  const file = join(stateDir, "env");
  return { ...(existsSync(file) ? readEnvFile(file) : {}), ...process.env };
}

export function required(env: NodeJS.ProcessEnv, name: string, hint: string): string {
  const v = env[name];
  if (!v) throw new SetupError(`${name} is not set (${hint})`);
  return v;
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
