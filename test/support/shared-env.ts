// What the global setup (shared-servers.ts) tells the test files through their environment.
import { z } from "zod";
import { zodLine } from "../../core/config-error.ts";

export const SHARED_ENV = "CRDFN_TEST_SHARED";

const sharedServers = z.object({
  /** Where the lanes' leases live (one folder per leased lane). */
  lockDir: z.string().min(1),
  sqs: z.object({ endpoint: z.string().url(), region: z.string(), accessKeyId: z.string(), secretAccessKey: z.string() }),
  lanes: z.array(z.object({ kubeconfigPath: z.string(), server: z.string().url(), kubectl: z.string(), caPath: z.string() })).min(1),
});

export type SharedServers = z.infer<typeof sharedServers>;

/** The shared servers of this run, or undefined when the file runs on its own (`node --test <file>`). */
export function readSharedServers(env: NodeJS.ProcessEnv = process.env): SharedServers | undefined {
  const raw = env[SHARED_ENV];
  if (!raw) return undefined;
  const parsed = sharedServers.safeParse(JSON.parse(raw));
  if (!parsed.success) throw new Error(`${SHARED_ENV}: ${zodLine(parsed.error)}`);
  return parsed.data;
}
