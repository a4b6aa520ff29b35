// Settings of a function process, from its environment, validated once in the entry: a bad
// setting stops start-up with ONE line naming it.
import { z } from "zod";
import { ConfigError, parseSettings } from "../../core/config-error.ts";
import { clusterIdSchema } from "../../core/event.ts";

export const authModes = ["kubeconfig", "in-cluster", "token", "eks"] as const;
export const eksClusterNameSchema = z.string().regex(/^[0-9A-Za-z][A-Za-z0-9\-_]{0,99}$/);
export const awsRegionSchema = z.string().regex(/^[a-z]{2}(-[a-z]+)+-\d$/);
/** Single-cluster settings: with CRDFN_CLUSTERS(_FILE) they belong in each cluster's entry. */
const singleClusterSettings = [
  "CRDFN_CLUSTER",
  "CRDFN_KUBE_AUTH",
  "CRDFN_KUBE_SERVER",
  "CRDFN_KUBE_CA_FILE",
  "CRDFN_KUBE_CA_DATA",
  "CRDFN_KUBE_TOKEN",
  "CRDFN_KUBE_TOKEN_FILE",
  "CRDFN_EKS_CLUSTER",
] as const;

const configSchema = z
  .object({
    /** The clusters served (functions/clusters/registry.ts): JSON, or a JSON/YAML file. */
    CRDFN_CLUSTERS: z.string().min(1).optional(),
    CRDFN_CLUSTERS_FILE: z.string().min(1).optional(),
    /** Without a registry: the id of the one cluster served; events naming another are refused. */
    CRDFN_CLUSTER: clusterIdSchema.default("default"),
    /** The keys events are verified with (functions/clusters/registry.ts); checked there against the clusters. */
    CRDFN_EVENT_KEYS: z.string().optional(),
    /**
     * Instead: the Secrets Manager secret (name or ARN) whose SecretString holds them, fetched at
     * start and again after CRDFN_EVENT_KEYS_SECRET_TTL seconds, so the function's configuration
     * names the secret and never holds a key, and a rotated secret is picked up without a deploy.
     */
    CRDFN_EVENT_KEYS_SECRET: z.string().min(1).optional(),
    /** The version stage fetched (AWSCURRENT unless set): the deploy's eventKeysLabel. */
    CRDFN_EVENT_KEYS_SECRET_STAGE: z.string().min(1).max(256).optional(),
    CRDFN_EVENT_KEYS_SECRET_TTL: z.coerce.number().int().min(0).max(86_400).default(300),
    /** A Secrets Manager-compatible endpoint (moto in tests); unset on AWS. */
    AWS_ENDPOINT_URL_SECRETS_MANAGER: z.url().optional(),
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
    CRDFN_EKS_CLUSTER: eksClusterNameSchema.optional(),
    AWS_REGION: awsRegionSchema.optional(),
    /** An SQS-compatible endpoint (ElasticMQ locally); unset on AWS. */
    AWS_ENDPOINT_URL_SQS: z.url().optional(),
    /** The FIFO event queue the local poller consumes (Lambda is given its queue by its event source). */
    CRDFN_QUEUE_URL: z.url().optional(),
    LOG_LEVEL: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"),
    /** Set by Lambda itself: metrics then go to CloudWatch as EMF, under this namespace. */
    AWS_LAMBDA_FUNCTION_NAME: z.string().min(1).optional(),
    POWERTOOLS_METRICS_NAMESPACE: z.string().min(1).max(255).default("crdfn"),
  })
  .superRefine((c, ctx) => {
    // Two sources of the keys would leave which one verifies to the reader's guess.
    if (c.CRDFN_EVENT_KEYS !== undefined && c.CRDFN_EVENT_KEYS_SECRET !== undefined)
      ctx.addIssue({ code: "custom", path: ["CRDFN_EVENT_KEYS_SECRET"], message: "set CRDFN_EVENT_KEYS or CRDFN_EVENT_KEYS_SECRET, not both" });
    if (c.CRDFN_CLUSTERS !== undefined || c.CRDFN_CLUSTERS_FILE !== undefined) {
      if (c.CRDFN_CLUSTERS !== undefined && c.CRDFN_CLUSTERS_FILE !== undefined)
        ctx.addIssue({ code: "custom", path: ["CRDFN_CLUSTERS_FILE"], message: "set CRDFN_CLUSTERS or CRDFN_CLUSTERS_FILE, not both" });
      // The single-cluster settings are checked against the raw environment in loadConfig.
      return;
    }
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
  const config = parseSettings(configSchema, env, "invalid setting ");
  const registry = env.CRDFN_CLUSTERS !== undefined ? "CRDFN_CLUSTERS" : env.CRDFN_CLUSTERS_FILE !== undefined ? "CRDFN_CLUSTERS_FILE" : undefined;
  const mixed = registry && singleClusterSettings.find((key) => env[key] !== undefined);
  if (mixed) throw new ConfigError(`invalid setting ${mixed}: not with ${registry}; put it in the cluster's entry`);
  return config;
}
