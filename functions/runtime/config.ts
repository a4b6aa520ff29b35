// Settings of a function process, from its environment, validated once in the entry: a bad
// setting stops start-up with ONE line naming it.
import { z } from "zod";
import { ConfigError } from "../../core/config-error.ts";

export const authModes = ["kubeconfig", "in-cluster", "token", "eks"] as const;

const configSchema = z.object({
  /** How to reach the API server. */
  CRDFN_KUBE_AUTH: z.enum(authModes).default("kubeconfig"),
  KUBECONFIG: z.string().min(1).optional(),
  /** token / eks modes: the API server URL and its CA (a file, or base64 PEM). */
  CRDFN_KUBE_SERVER: z.url({ protocol: /^https?$/ }).optional(),
  CRDFN_KUBE_CA_FILE: z.string().min(1).optional(),
  CRDFN_KUBE_CA_DATA: z.base64().optional(),
  /** token mode: the bearer token itself, or a file re-read as it rotates. */
  CRDFN_KUBE_TOKEN: z.string().min(1).optional(),
  CRDFN_KUBE_TOKEN_FILE: z.string().min(1).optional(),
  /** eks mode: the EKS cluster name signed into the token. */
  CRDFN_EKS_CLUSTER: z.string().regex(/^[0-9A-Za-z][A-Za-z0-9\-_]{0,99}$/).optional(),
  AWS_REGION: z.string().regex(/^[a-z]{2}(-[a-z]+)+-\d$/).optional(),
  /** An SQS-compatible endpoint (ElasticMQ locally); unset on AWS. */
  AWS_ENDPOINT_URL_SQS: z.url().optional(),
  /** The event queues the local poller consumes; the standard queue also carries requeues. */
  CRDFN_QUEUE_URL: z.url().optional(),
  CRDFN_STANDARD_QUEUE_URL: z.url().optional(),
  LOG_LEVEL: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"),
}).superRefine((c, ctx) => {
  const need = (key: keyof typeof c, why: string) => {
    if (c[key] === undefined) ctx.addIssue({ code: "custom", path: [key], message: `required ${why}` });
  };
  if (c.CRDFN_KUBE_AUTH === "token" || c.CRDFN_KUBE_AUTH === "eks") need("CRDFN_KUBE_SERVER", `when CRDFN_KUBE_AUTH=${c.CRDFN_KUBE_AUTH}`);
  if (c.CRDFN_KUBE_AUTH === "token" && c.CRDFN_KUBE_TOKEN === undefined) need("CRDFN_KUBE_TOKEN_FILE", "(or CRDFN_KUBE_TOKEN) when CRDFN_KUBE_AUTH=token");
  if (c.CRDFN_KUBE_AUTH === "eks") {
    need("CRDFN_EKS_CLUSTER", "when CRDFN_KUBE_AUTH=eks");
    need("AWS_REGION", "when CRDFN_KUBE_AUTH=eks");
  }
});

export type FunctionConfig = z.infer<typeof configSchema>;


/** Reads only the settings above; never echoes a value (tokens live here). */
export function loadConfig(env: NodeJS.ProcessEnv): FunctionConfig {
  const parsed = configSchema.safeParse(env);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  throw new ConfigError(`invalid setting ${issue?.path.join(".") ?? "?"}: ${issue?.message ?? "invalid"}`);
}
