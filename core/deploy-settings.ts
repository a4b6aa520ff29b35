// What `crdfn generate` needs besides the operators: where they run. A small YAML file (or the
// command's flags); a wrong value is one line naming the setting.
import { z } from "zod";
import { ConfigError } from "./config-error.ts";

const dnsLabel = z.string().regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, "must be a lower-case DNS label");

export const deploySettingsSchema = z.strictObject({
  /** The operator modules (paths relative to the settings file) and their Lambda handlers (relative to serverless.yml). */
  operators: z
    .array(
      z.strictObject({
        module: z.string().min(1),
        /** Default: lambda.handler beside the module. */
        handler: z.string().regex(/^[^\s]+\.[A-Za-z_$][\w$]*$/, "must be <file without extension>.<export>, e.g. src/lambda.handler").optional(),
      }),
    )
    .default([]),
  /** Where the generated files go, relative to the settings file. */
  out: z.string().min(1).default("deploy"),
  /** The bridge's cluster name, carried in every event. */
  cluster: z.string().regex(/^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/, "must be a short name (letters, digits, - _ .)").max(63).default("default"),
  /** The namespaces the operators serve; empty: all (except the always-denied ones). */
  namespaces: z.array(dnsLabel).default([]),
  /** Where the functions' ServiceAccounts live. */
  functionsNamespace: dnsLabel.default("crdfn-functions"),
  bridge: z
    .strictObject({
      namespace: dnsLabel.default("crdfn-system"),
      image: z.string().regex(/^[^\s:@]+(:[\w][\w.-]{0,127})?(@sha256:[0-9a-f]{64})?$/, "must be an image reference such as ghcr.io/crdfn/bridge:0.1.0").default("ghcr.io/crdfn/bridge:0.1.0"),
      replicas: z.number().int().min(1).max(5).default(2),
    })
    .default({ namespace: "crdfn-system", image: "ghcr.io/crdfn/bridge:0.1.0", replicas: 2 }),
  queues: z
    .strictObject({
      /** Queue names are <prefix><operator>.fifo, <prefix><operator>-requeue and their -dlq. */
      prefix: z.string().regex(/^[A-Za-z0-9_-]{0,40}$/, "must be letters, digits, - and _ (at most 40)").default("crdfn-prod-"),
      /** The account's SQS endpoint the bridge sends to: https://sqs.<region>.amazonaws.com/<account>. */
      urlBase: z.url("must be a URL such as https://sqs.us-east-1.amazonaws.com/123456789012").default("https://sqs.us-east-1.amazonaws.com/000000000000"),
      region: z.string().regex(/^[a-z]{2}(-[a-z]+)+-\d$/, "must be an AWS region such as us-east-1").default("us-east-1"),
    })
    .default({ prefix: "crdfn-prod-", urlBase: "https://sqs.us-east-1.amazonaws.com/000000000000", region: "us-east-1" }),
});

export type DeploySettings = z.output<typeof deploySettingsSchema>;
export type DeploySettingsInput = z.input<typeof deploySettingsSchema>;

/** Validates settings; `source` names the file (or "flags") in the one-line error. */
export function parseDeploySettings(input: unknown, source: string): DeploySettings {
  const parsed = deploySettingsSchema.safeParse(input ?? {});
  if (parsed.success) {
    const s = parsed.data;
    const reserved = ["kube-system", s.bridge.namespace, s.functionsNamespace];
    const bad = s.namespaces.find((n) => reserved.includes(n));
    if (bad) throw new ConfigError(`${source}: namespaces: ${bad} is never served (kube-system, the bridge's and the functions' namespaces are always denied)`);
    return s;
  }
  const issue = parsed.error.issues[0]!;
  throw new ConfigError(`${source}: ${issue.path.join(".") || "(top)"}: ${issue.message}`);
}

/** The namespaces a function may never write in, whatever it serves. */
export function deniedNamespaces(s: DeploySettings): string[] {
  return [...new Set(["kube-system", s.bridge.namespace, s.functionsNamespace])];
}
