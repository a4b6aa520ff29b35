// What `crdfn generate` needs besides the operators: where they run. A small YAML file (or the
// command's flags); a wrong value is one line naming the setting. What crdfn cannot know (the
// project's name, the cluster's, the bridge's image, the AWS account's queue URLs, or on GCP the
// project, region and GKE cluster) has no default: a missing one is refused, all of them named in
// one line, and never written as a placeholder. `target` says where the functions run: AWS Lambda
// (the default; SQS FIFO, Serverless Framework) or Cloud Run functions (Pub/Sub, Terraform).
import { z } from "zod";
import { ConfigError, parseSettings } from "../core/config-error.ts";
import { nearestKey } from "./did-you-mean.ts";
import type { TracingDeploySettings } from "./tracing-env.ts";

const dnsLabel = z.string().regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, "must be a lower-case DNS label");
const awsRegion = z.string().regex(/^[a-z]{2}(-[a-z]+)+-\d$/, "must be an AWS region such as us-east-1");
const gcpRegion = z.string().regex(/^[a-z]+-[a-z]+\d+$/, "must be a Google Cloud region such as europe-west1");
const gcpLocation = z.string().regex(/^[a-z]+-[a-z]+\d+(-[a-z])?$/, "must be a Google Cloud region or zone such as europe-west1 or europe-west1-b");
const gcpProject = z.string().regex(/^[a-z][-a-z0-9]{4,28}[a-z0-9]$/, "must be a Google Cloud project id (6–30 lower-case letters, digits and -)");
/** An empty YAML value (`image:`) is null: the same as leaving the key out. */
const unset = <T extends z.ZodType>(t: T) => z.preprocess((v) => (v === null ? undefined : v), t.optional());

const rawSchema = z.strictObject({
  /**
   * The project's name: it names the project's bridge (crdfn-bridge-<project>: its Deployment,
   * ServiceAccount, ConfigMap, Lease and RBAC), so projects sharing a cluster never overwrite
   * each other's, and the default queue prefix.
   */
  project: unset(dnsLabel.max(40, "must be at most 40 characters (it is part of Kubernetes names and labels)")),
  /** The operator modules (paths relative to the settings file) and their Lambda handlers (relative to serverless.yml). */
  operators: z
    .array(
      z.strictObject({
        module: z.string().min(1),
        /** Default: lambda.handler beside the module. */
        handler: z
          .string()
          .regex(/^[^\s]+\.[A-Za-z_$][\w$]*$/, "must be <file without extension>.<export>, e.g. src/lambda.handler")
          .optional(),
        /** Cloud Run: the functions-framework function it registers (`http("<name>", httpHandler(operator))`). Default: the lower-cased kind. */
        function: z
          .string()
          .regex(/^[A-Za-z](?:[-_A-Za-z0-9]{0,61}[A-Za-z0-9])?$/, "must be a functions-framework function name (letters, digits, - and _)")
          .optional(),
      }),
    )
    .default([]),
  /** Where the functions run: lambda (SQS FIFO, serverless.yml) or cloudrun (Pub/Sub push, Terraform). */
  target: z.enum(["lambda", "cloudrun"]).default("lambda"),
  /** Where the generated files go, relative to the settings file. */
  out: z.string().min(1).default("deploy"),
  /** The bridge's cluster name, carried in every event; the functions serve only it. */
  cluster: unset(
    z
      .string()
      .regex(/^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/, "must be a short name (letters, digits, - _ .)")
      .max(63),
  ),
  /**
   * The namespaces the operators serve: every grant of every generated identity is a Role in
   * them (RBAC cannot say "every namespace but kube-system"). Needed as soon as an operator or
   * a kind it owns is namespaced; kube-system is served only if listed here.
   */
  namespaces: z.array(dnsLabel).default([]),
  /** Where the functions' ServiceAccounts live. */
  functionsNamespace: dnsLabel.default("crdfn-functions"),
  bridge: z
    .strictObject({
      namespace: dnsLabel.default("crdfn-system"),
      image: unset(
        z
          .string()
          .regex(/^[^\s:@]+(:[\w][\w.-]{0,127})?(@sha256:[0-9a-f]{64})?$/, "must be an image reference such as registry.example.com/shop/crdfn-bridge:0.1.0"),
      ),
      replicas: z.number().int().min(1).max(5).default(2),
    })
    .default({ namespace: "crdfn-system", replicas: 2 }),
  queues: z
    .strictObject({
      /** Queue names are <prefix><operator>.fifo and <prefix><operator>-dlq.fifo. Default crdfn-<project>-. */
      prefix: unset(z.string().regex(/^[A-Za-z0-9_-]{0,40}$/, "must be letters, digits, - and _ (at most 40)")),
      /** The account's SQS endpoint the bridge sends to: https://sqs.<region>.amazonaws.com/<account id>. */
      urlBase: unset(z.url("must be a URL such as https://sqs.us-east-1.amazonaws.com/123456789012")),
      /** Default: the region in urlBase's host. */
      region: unset(awsRegion),
    })
    .default({}),
  /** Traces of each change (docs/tracing.md), exported by OTLP/HTTP; off without an endpoint. */
  tracing: z
    .strictObject({
      /** Where the bridge exports: an OpenTelemetry Collector's OTLP/HTTP base URL, e.g. http://otel-collector.observability:4318. */
      endpoint: z.url({ protocol: /^https?$/, error: "must be an OTLP/HTTP base URL such as http://otel-collector.observability:4318" }).optional(),
      /** Where the functions export, when not there: on Lambda the ADOT layer's collector, http://localhost:4318. */
      functionsEndpoint: z.url({ protocol: /^https?$/, error: "must be an OTLP/HTTP base URL such as http://localhost:4318" }).optional(),
      /** The share of changes traced, decided by the bridge for the whole change. */
      sampleRatio: z.number().min(0).max(1).default(1),
    })
    .default({ sampleRatio: 1 }),
  /** target: cloudrun. */
  gcp: z
    .strictObject({
      /** The project the functions, topics and the GKE cluster are in. */
      project: unset(gcpProject),
      /** Where the functions and the source bucket are. */
      region: unset(gcpRegion),
      /** The GKE cluster the bridge runs in and the functions serve (its endpoint and CA are read by Terraform). */
      gkeCluster: unset(z.string().regex(/^[a-z]([-a-z0-9]{0,38}[a-z0-9])?$/, "must be a GKE cluster name")),
      /** The GKE cluster's location. Default: region. */
      gkeLocation: unset(gcpLocation),
      /** Names are <prefix><operator>…: functions, service accounts, topics. Default crdfn-<project>-. */
      prefix: unset(z.string().regex(/^[a-z][-a-z0-9]{0,20}-$/, "must be lower-case letters, digits and -, ending in - (at most 22)")),
      /** The folder uploaded as every function's source, relative to the settings file: its package.json `main` registers each operator's function. */
      source: z.string().min(1).default("."),
      runtime: z.enum(["nodejs22", "nodejs24"]).default("nodejs22"),
      /** The most instances of each function (protects the API server). */
      maxInstances: z.number().int().min(1).max(1000).default(10),
    })
    .default({ source: ".", runtime: "nodejs22", maxInstances: 10 }),
});

/**
 * Every key the settings file takes, as dotted paths (`gcp.gkeLocation`, `operators[].module`),
 * read from the schema itself: docs/configuration.md documents each (test/docs.test.ts).
 */
export function deploySettingKeys(): string[] {
  const keys: string[] = [];
  const walk = (t: z.ZodType, path: string): void => {
    const def = (t as unknown as { def: { type: string; innerType?: z.ZodType; out?: z.ZodType; element?: z.ZodType } }).def;
    if (def.type === "default" || def.type === "optional") return walk(def.innerType!, path);
    if (def.type === "pipe") return walk(def.out!, path);
    if (def.type === "array" && def.element && (def.element as unknown as { def: { type: string } }).def.type === "object")
      return walk(def.element, `${path}[]`);
    if (def.type !== "object") return void keys.push(path);
    for (const [k, v] of Object.entries((t as z.ZodObject).shape)) walk(v as z.ZodType, path ? `${path}.${k}` : k);
  };
  walk(rawSchema, "");
  return keys;
}

interface CommonDeploySettings {
  project: string;
  operators: Array<{ module: string; handler?: string | undefined; function?: string | undefined }>;
  out: string;
  cluster: string;
  namespaces: string[];
  functionsNamespace: string;
  bridge: { namespace: string; image: string; replicas: number };
  tracing: TracingDeploySettings;
}

/** Where the Cloud Run functions, their topics and the GKE cluster are. */
export interface GcpSettings {
  project: string;
  region: string;
  gkeCluster: string;
  gkeLocation: string;
  prefix: string;
  source: string;
  runtime: "nodejs22" | "nodejs24";
  maxInstances: number;
}

export type LambdaDeploySettings = CommonDeploySettings & { target: "lambda"; queues: QueueSettings };
export type CloudRunDeploySettings = CommonDeploySettings & { target: "cloudrun"; gcp: GcpSettings };
export type DeploySettings = LambdaDeploySettings | CloudRunDeploySettings;
export type DeploySettingsInput = z.input<typeof rawSchema>;

/** The values crdfn cannot know, what each is, and (for the CLI) where else it can come from. */
export const UNKNOWABLE = {
  project: "this project's name; it names its bridge, so that projects sharing a cluster keep theirs, e.g. shop",
  cluster: "the cluster's name, carried in every event, e.g. your EKS cluster's",
  "bridge.image": "the bridge image you built and pushed (Dockerfile: node_modules/crdfn/infra/bridge/Dockerfile)",
  "queues.urlBase": "https://sqs.<region>.amazonaws.com/<account id>, where the operators' queues are",
  "gcp.project": "the Google Cloud project of the functions, their topics and the GKE cluster",
  "gcp.region": "the region of the functions, e.g. europe-west1",
  "gcp.gkeCluster": "the GKE cluster the bridge runs in and the functions serve",
} as const;
export type Unknowable = keyof typeof UNKNOWABLE;

const AWS_SQS_HOST = /^sqs\.([a-z0-9-]+)\.amazonaws\.com(\.cn)?$/;

function parseRaw(input: unknown, source: string): z.output<typeof rawSchema> {
  const parsed = rawSchema.safeParse(input ?? {});
  const first = parsed.error?.issues[0];
  // A key the file does not take: most often a typo of one it does, named in the same line.
  if (first?.code === "unrecognized_keys") {
    const where = first.path
      .map((p) => (typeof p === "number" ? "[]" : `.${String(p)}`))
      .join("")
      .replace(/^\./, "");
    const shown = first.path.map(String).join(".");
    const keys = first.keys.map((k) => {
      const near = nearestKey(k, where, deploySettingKeys());
      return `"${k}"${near ? ` (did you mean ${near}?)` : ""}`;
    });
    throw new ConfigError(`${source}: ${shown || "(top)"}: Unrecognized key${keys.length > 1 ? "s" : ""}: ${keys.join(", ")}`);
  }
  return parseSettings(rawSchema, input ?? {}, `${source}: `);
}

function refuseMissing(given: Partial<Record<Unknowable, string | undefined>>, source: string, flags: Partial<Record<Unknowable, string>>): void {
  const missing = (Object.keys(given) as Unknowable[]).filter((k) => given[k] === undefined);
  if (missing.length === 0) return;
  const named = missing.map((k) => `${k} (${flags[k] ? `${flags[k]}; ` : ""}${UNKNOWABLE[k]})`);
  throw new ConfigError(`${source}: set ${named.join(", ")}: crdfn cannot know ${missing.length === 1 ? "it" : "them"} and writes no placeholder`);
}

/** Where the operators' queues are: what the bridge, `crdfn status` and `crdfn dlq` need of the settings. */
export interface QueueSettings {
  prefix: string;
  urlBase: string;
  region: string;
}

function queuesOf(r: z.output<typeof rawSchema>, source: string): QueueSettings {
  const urlBase = r.queues.urlBase!.replace(/\/+$/, "");
  const url = new URL(urlBase);
  const aws = AWS_SQS_HOST.exec(url.hostname);
  if (aws && !/^\/\d{12}$/.test(url.pathname))
    throw new ConfigError(`${source}: queues.urlBase: must end in the 12-digit AWS account id, as https://sqs.${aws[1]}.amazonaws.com/123456789012`);
  if (aws && url.pathname === "/000000000000")
    throw new ConfigError(`${source}: queues.urlBase: 000000000000 is a placeholder, not an AWS account; name your account id`);
  const region = r.queues.region ?? aws?.[1];
  if (!region) throw new ConfigError(`${source}: queues.region: required when queues.urlBase is not an AWS SQS endpoint (sqs.<region>.amazonaws.com)`);
  if (aws && region !== aws[1]) throw new ConfigError(`${source}: queues.region: ${region} is not the region of queues.urlBase (${aws[1]})`);
  return { prefix: r.queues.prefix ?? `crdfn-${r.project!}-`, urlBase, region };
}

/**
 * Validates settings; `source` names the file (or "flags") in the one-line error, and `flags`
 * names the command-line flag of each value crdfn cannot know, when there is one.
 */
export function parseDeploySettings(input: unknown, source: string, flags: Partial<Record<Unknowable, string>> = {}): DeploySettings {
  const r = parseRaw(input, source);
  const common = { project: r.project, cluster: r.cluster, "bridge.image": r.bridge.image };
  if (r.target === "cloudrun")
    refuseMissing({ ...common, "gcp.project": r.gcp.project, "gcp.region": r.gcp.region, "gcp.gkeCluster": r.gcp.gkeCluster }, source, flags);
  else refuseMissing({ ...common, "queues.urlBase": r.queues.urlBase }, source, flags);
  const base: CommonDeploySettings = {
    project: r.project!,
    operators: r.operators,
    out: r.out,
    cluster: r.cluster!,
    namespaces: r.namespaces,
    functionsNamespace: r.functionsNamespace,
    bridge: { namespace: r.bridge.namespace, image: r.bridge.image!, replicas: r.bridge.replicas },
    tracing: r.tracing,
  };
  const s: DeploySettings =
    r.target === "cloudrun" ? { ...base, target: "cloudrun", gcp: gcpOf(r, source) } : { ...base, target: "lambda", queues: queuesOf(r, source) };
  const reserved = [s.bridge.namespace, s.functionsNamespace];
  const bad = s.namespaces.find((n) => reserved.includes(n));
  if (bad) throw new ConfigError(`${source}: namespaces: ${bad} is never served (the bridge's and the functions' namespaces are always denied)`);
  return s;
}

function gcpOf(r: z.output<typeof rawSchema>, source: string): GcpSettings {
  const g = r.gcp;
  const prefix = g.prefix ?? `crdfn-${r.project!}-`;
  // GCP service account ids are 6–30 characters: <prefix><operator> (deploy/gcp.ts checks each).
  if (prefix.length > 22)
    throw new ConfigError(
      `${source}: gcp.prefix: ${prefix} is ${prefix.length} characters; at most 22, so that <prefix><operator> names a service account (30 at most): set a shorter gcp.prefix`,
    );
  return {
    project: g.project!,
    region: g.region!,
    gkeCluster: g.gkeCluster!,
    gkeLocation: g.gkeLocation ?? g.region!,
    prefix,
    source: g.source,
    runtime: g.runtime,
    maxInstances: g.maxInstances,
  };
}

/** Only the operator list (what `crdfn status` in a project needs), with no value crdfn cannot know required. */
export function parseSettingsOperators(input: unknown, source: string): DeploySettings["operators"] {
  return parseRaw(input, source).operators;
}

/**
 * What `crdfn dev` takes of a project's settings (the namespaces it serves, its project's name),
 * the file validated as `crdfn generate` validates it, with no value crdfn cannot know required:
 * `crdfn init` leaves them empty, and dev needs none of them.
 */
export function parseDevSettings(input: unknown, source: string): { namespaces: string[]; project?: string } {
  const r = parseRaw(input, source);
  return { namespaces: r.namespaces, ...(r.project === undefined ? {} : { project: r.project }) };
}

/** Only what locating the operators' queues needs (their modules, the project or prefix, the URL base), or on Cloud Run their topics. */
export function parseQueueSettings(
  input: unknown,
  source: string,
):
  | { operators: DeploySettings["operators"]; queues: QueueSettings; target: "lambda" }
  | { operators: DeploySettings["operators"]; target: "cloudrun"; pubsub: { project: string; prefix: string } } {
  const r = parseRaw(input, source);
  if (r.target === "cloudrun") {
    refuseMissing({ ...(r.gcp.prefix === undefined ? { project: r.project } : {}), "gcp.project": r.gcp.project }, source, {});
    return { operators: r.operators, target: "cloudrun", pubsub: { project: r.gcp.project!, prefix: r.gcp.prefix ?? `crdfn-${r.project!}-` } };
  }
  refuseMissing({ ...(r.queues.prefix === undefined ? { project: r.project } : {}), "queues.urlBase": r.queues.urlBase }, source, {});
  return { operators: r.operators, queues: queuesOf(r, source), target: "lambda" };
}

/** The namespaces a function may never write in: the bridge's, the functions', and kube-system unless it is served. */
export function deniedNamespaces(
  s: Pick<DeploySettings, "namespaces" | "functionsNamespace"> & { bridge: Pick<DeploySettings["bridge"], "namespace"> },
): string[] {
  return [...new Set([...(s.namespaces.includes("kube-system") ? [] : ["kube-system"]), s.bridge.namespace, s.functionsNamespace])];
}
