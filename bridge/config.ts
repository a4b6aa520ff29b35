// The bridge's settings: environment variables (CRDFN_*), optionally layered over a mounted
// YAML/JSON file (CRDFN_CONFIG_FILE). The environment wins, so a ConfigMap can hold the
// structure and a Deployment can still override one value. A bad setting is reported as one
// line that names the variable (or the file path) and says what is wrong.
//
// Watched resources and the child kinds each one owns:
//   env  CRDFN_RESOURCES="stable.example.com/v1/crontabs>batch/v1/cronjobs+v1/configmaps, example.com/v1/widgets"
//        A comma-separated list of `group/version/plural`, each optionally followed by `>` and
//        the kinds it owns, joined with `+`. The core group is written `v1/<plural>` (or `core/v1/<plural>`).
//        An entry may end in `@<queue URL>` to send that resource's events to its own queue
//        (a queue per operator) instead of CRDFN_QUEUE_URL, or in `@projects/<p>/topics/<t>`
//        to its own Pub/Sub topic instead of CRDFN_PUBSUB_TOPIC.
//   file resources:
//          - { group: stable.example.com, version: v1, plural: crontabs, resyncSeconds: 21600,
//              owns: [{ group: batch, version: v1, plural: cronjobs }],
//              reads: [{ group: "", version: v1, plural: secrets }] }   (reads: file only)
import { z } from "zod";
import { ConfigError } from "../core/config-error.ts";
import { PARENT_UID_LABEL } from "../core/event.ts";
import { parseEventKey, type EventKey } from "../core/event-auth.ts";
import type { GroupVersionResource } from "../core/resource-path.ts";
import { topicNameSchema } from "./pubsub-transport.ts";

export interface WatchedResource extends GroupVersionResource {
  owns: GroupVersionResource[];
  reads?: GroupVersionResource[];
  queueUrl?: string;
  topic?: string;
  resyncSeconds?: number;
  bodies?: boolean;
}

const dnsLabel = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const resourceRefSchema = z.strictObject({
  group: z.string().regex(/^$|^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/, 'must be an API group ("" for core)'),
  version: z.string().regex(/^v[0-9a-z]+$/, "must be an API version such as v1"),
  plural: z.string().regex(dnsLabel, "must be a lower-case plural resource name"),
});
const watchedResourceSchema = resourceRefSchema.extend({
  owns: z.array(resourceRefSchema).default([]),
  /**
   * Kinds its objects reference by name (recorded by the functions in status.references): each
   * watched once, as metadata only; a change announces the objects that reference it.
   */
  reads: z.array(resourceRefSchema).optional(),
  /** This resource's events go here instead of queue.url (e.g. the queue of its operator's function). */
  queueUrl: z.url("must be the queue URL").optional(),
  /** On Pub/Sub: this resource's events go to this topic instead of queue.topic. */
  topic: topicNameSchema.optional(),
  /** Re-announce this resource's objects this often, spread over the period; 0 off. Default: resyncSeconds. */
  resyncSeconds: z.coerce
    .number()
    .int()
    .min(0)
    .max(7 * 86400)
    .optional(),
  /** Whether this resource's announcements carry the object. Default: bodies. */
  bodies: z.boolean().optional(),
});

const positiveInt = (min: number, max: number) => z.coerce.number().int().min(min).max(max);
const bool = z.union([z.boolean(), z.enum(["true", "false"]).transform((s) => s === "true")]);

export const bridgeConfigSchema = z
  .strictObject({
    /** Name of this cluster, put in every event so one function fleet can serve many clusters. */
    cluster: z
      .string()
      .regex(/^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/, "must be a short name (letters, digits, - _ .)")
      .max(63)
      .default("default"),
    queue: z.strictObject({
      /** A FIFO queue: one ordered stream per object is what keeps one reconcile of an object at a time. */
      url: z.url("must be the queue URL").optional(),
      /** Or a Pub/Sub topic (projects/<p>/topics/<t>): an ordering key per object is its ordered stream. */
      topic: topicNameSchema.optional(),
    }),
    /** Pub/Sub: the emulator's host:port (PUBSUB_EMULATOR_HOST); unset on GCP (application default credentials). */
    pubsub: z
      .strictObject({
        emulatorHost: z
          .string()
          .regex(/^[^\s/]+:\d+$/, "must be host:port")
          .optional(),
      })
      .default({}),
    resources: z.array(watchedResourceSchema).min(1, "name at least one resource to watch"),
    /** Empty: all namespaces. */
    namespaces: z.array(z.string().regex(dnsLabel, "must be namespace names")).default([]),
    /** Applies to the watched resources. */
    labelSelector: z.string().default(""),
    /** Which objects of an owned kind the bridge watches: those labelled as children by the functions. */
    childLabelSelector: z.string().min(1).default(PARENT_UID_LABEL),
    /**
     * Put the object itself in its announcements (up to maxBodyBytes), so its function need not
     * read it: queue messages then hold object bodies (encrypted at rest on SQS). false: keys only.
     * Per resource: resources[].bodies.
     */
    bodies: bool.default(true),
    /** A larger object is announced by its keys only, and its function reads it. */
    maxBodyBytes: positiveInt(1024, 200 * 1024).default(64 * 1024),
    /** Bodies waiting to be published, at most (memory bound); beyond it events go keys only. */
    maxPendingBodyBytes: positiveInt(1024 * 1024, 1024 * 1024 * 1024).default(32 * 1024 * 1024),
    /**
     * A starting bridge keeps the listed bodies of the objects that need work until their
     * children are listed and they are announced, at most this many bytes for all its resources
     * together (memory bound): their first reconciles need not read them. Beyond it, keys only.
     * 0: none. 32 MiB holds 100,000 Greetings' bodies (8 MiB held 30 %: 69,639 GETs at N = 100,000).
     */
    maxInitialBodyBytes: positiveInt(0, 256 * 1024 * 1024).default(32 * 1024 * 1024),
    /**
     * A starting bridge announces what its first lists found needing work at most this many at a
     * time, the next as each is answered by its status write (bridge/start-window.ts), so a cold
     * start over many objects keeps the queue shallow. 0: all at once. 200: at N = 10,000 on the
     * local stack 263 s against 491 s with 1,000 (ElasticMQ 8.3 against 22.6 ms of CPU per object,
     * `npm run bench:coldscale`), and more at once than an API server wants from one operator's start.
     */
    startWindow: positiveInt(0, 1_000_000).default(200),
    /**
     * Re-announce every object this often, spread evenly over the period; 0 (the default) turns
     * resync off: a settled object is never announced again unless it changes, one of its children
     * does, or it asked to be (status.nextReconcile). Per resource: resources[].resyncSeconds.
     */
    resyncSeconds: z.coerce
      .number()
      .int()
      .min(0, "must be 0 (off) or 1..604800 seconds")
      .max(7 * 86400, "must be 0 (off) or 1..604800 seconds")
      .default(0),
    /** Skip changes that touch only status, managedFields or resourceVersion of a watched resource. */
    skipStatusOnly: bool.default(true),
    /**
     * Whether a child's status change announces its parent. Parents usually mirror their
     * children's readiness, and a function never writes a child's status itself, so no loop.
     */
    childStatus: z.enum(["announce", "ignore"]).default("announce"),
    /**
     * The functions' server-side apply field manager (defineOperator's fieldManager). A child
     * change that is the function's own apply does not announce its parent again; "" turns that off.
     */
    functionFieldManager: z.string().max(128).default("crdfn"),
    httpPort: positiveInt(0, 65535).default(8080),
    lease: z
      .strictObject({
        /** Unset: no leader election (a single local bridge). */
        name: z.string().regex(dnsLabel, "must be a Lease name").optional(),
        namespace: z.string().regex(dnsLabel, "must be a namespace name").default("crdfn-system"),
        identity: z.string().min(1).max(128).optional(),
        /** A standby takes over at most this long (plus one retry) after the leader dies. */
        durationSeconds: positiveInt(3, 15).default(8),
      })
      .default({ namespace: "crdfn-system", durationSeconds: 8 }),
    /** Distinct objects waiting to be published before the watch is paused (memory bound). */
    maxPending: positiveInt(10, 1_000_000).default(1000),
    publishConcurrency: positiveInt(1, 64).default(4),
    /** Under a steady stream, a part-filled send waits up to this for more (publisher.ts). Unset: the transport's (SQS 40 ms, Pub/Sub 0). */
    sendLingerMs: positiveInt(0, 1000).optional(),
    listPageSize: positiveInt(10, 10_000).default(500),
    /** A watch that has said nothing (not even a bookmark) for this long is presumed dead. */
    watchSilenceSeconds: positiveInt(5, 3600).default(90),
    logLevel: z.enum(["trace", "debug", "info", "warn", "error", "fatal"]).default("info"),
    /**
     * The API server and a ServiceAccount token file (re-read as it rotates), for a bridge run
     * outside the cluster with its own identity. Unset: in a pod, its ServiceAccount; elsewhere
     * the kubeconfig (KUBECONFIG, --kubeconfig).
     */
    kube: z
      .strictObject({
        server: z.url({ protocol: /^https$/, error: "must be an https:// URL" }).optional(),
        caFile: z.string().min(1).optional(),
        tokenFile: z.string().min(1).optional(),
      })
      .refine((k) => (k.server === undefined) === (k.tokenFile === undefined), {
        message: "needs both CRDFN_KUBE_SERVER and CRDFN_KUBE_TOKEN_FILE",
        path: ["tokenFile"],
      })
      .default({}),
    aws: z
      .strictObject({
        region: z.string().min(1).default("us-east-1"),
        endpoint: z.url("must be a URL").optional(),
      })
      .default({ region: "us-east-1" }),
  })
  .superRefine((c, ctx) => {
    const onPubSub = c.queue.topic !== undefined;
    if (c.queue.url === undefined && !onPubSub)
      ctx.addIssue({ code: "custom", path: ["queue", "url"], message: "is required (or CRDFN_PUBSUB_TOPIC, to publish to Pub/Sub)" });
    if (c.queue.url !== undefined && onPubSub)
      ctx.addIssue({
        code: "custom",
        path: ["queue", "topic"],
        message: "one bridge publishes to SQS or to Pub/Sub: set CRDFN_QUEUE_URL or CRDFN_PUBSUB_TOPIC, not both",
      });
    c.resources.forEach((r, i) => {
      if (onPubSub && r.queueUrl !== undefined)
        ctx.addIssue({
          code: "custom",
          path: ["resources", i, "queueUrl"],
          message: "is an SQS queue, but this bridge publishes to Pub/Sub (CRDFN_PUBSUB_TOPIC): name a topic",
        });
      if (!onPubSub && r.topic !== undefined)
        ctx.addIssue({
          code: "custom",
          path: ["resources", i, "topic"],
          message: "is a Pub/Sub topic, but this bridge publishes to SQS (CRDFN_QUEUE_URL): name a queue URL",
        });
    });
    const urls: Array<[string, (string | number)[]]> = [
      ...(c.queue.url === undefined ? [] : [[c.queue.url, ["queue", "url"]] as [string, (string | number)[]]]),
      ...c.resources.flatMap((r, i): Array<[string, (string | number)[]]> => (r.queueUrl === undefined ? [] : [[r.queueUrl, ["resources", i, "queueUrl"]]])),
    ];
    for (const [url, path] of urls) {
      if (!url.endsWith(".fifo"))
        ctx.addIssue({ code: "custom", path, message: "is not a FIFO queue (its name does not end in .fifo): crdfn needs one ordered stream per object" });
    }
  });

export type BridgeConfig = z.output<typeof bridgeConfigSchema>;

/** Parses the compact env syntax for CRDFN_RESOURCES (see the top of this file). */
export function parseResourceList(text: string): unknown[] {
  const ref = (s: string): Record<string, string> => {
    const parts = s.trim().split("/");
    if (parts.length === 2) return { group: "", version: parts[0] ?? "", plural: parts[1] ?? "" };
    if (parts.length === 3) return { group: parts[0] === "core" ? "" : (parts[0] ?? ""), version: parts[1] ?? "", plural: parts[2] ?? "" };
    throw new ConfigError(`"${s.trim()}" is not group/version/plural`);
  };
  return text
    .split(",")
    .filter((s) => s.trim() !== "")
    .map((entry) => {
      const at = entry.indexOf("@");
      const [parent = "", owned] = (at < 0 ? entry : entry.slice(0, at)).split(">");
      const destination = at < 0 ? undefined : entry.slice(at + 1).trim();
      const own = destination === undefined ? {} : destination.startsWith("projects/") ? { topic: destination } : { queueUrl: destination };
      return { ...ref(parent), owns: owned === undefined ? [] : owned.split("+").map(ref), ...own };
    });
}

const list = (s: string): string[] =>
  s
    .split(",")
    .map((x) => x.trim())
    .filter((x) => x !== "");

/** Each environment variable and the config path (dotted) it sets. */
const envSettings: Readonly<Record<string, string>> = {
  CRDFN_CLUSTER: "cluster",
  CRDFN_QUEUE_URL: "queue.url",
  CRDFN_PUBSUB_TOPIC: "queue.topic",
  PUBSUB_EMULATOR_HOST: "pubsub.emulatorHost",
  CRDFN_RESOURCES: "resources",
  CRDFN_NAMESPACES: "namespaces",
  CRDFN_LABEL_SELECTOR: "labelSelector",
  CRDFN_BODIES: "bodies",
  CRDFN_MAX_BODY_BYTES: "maxBodyBytes",
  CRDFN_MAX_INITIAL_BODY_BYTES: "maxInitialBodyBytes",
  CRDFN_START_WINDOW: "startWindow",
  CRDFN_RESYNC_SECONDS: "resyncSeconds",
  CRDFN_SKIP_STATUS_ONLY: "skipStatusOnly",
  CRDFN_CHILD_STATUS: "childStatus",
  CRDFN_FUNCTION_FIELD_MANAGER: "functionFieldManager",
  CRDFN_HTTP_PORT: "httpPort",
  CRDFN_LEASE_NAME: "lease.name",
  CRDFN_LEASE_NAMESPACE: "lease.namespace",
  CRDFN_LEASE_IDENTITY: "lease.identity",
  CRDFN_LEASE_DURATION_SECONDS: "lease.durationSeconds",
  CRDFN_MAX_PENDING: "maxPending",
  CRDFN_PUBLISH_CONCURRENCY: "publishConcurrency",
  CRDFN_SEND_LINGER_MS: "sendLingerMs",
  CRDFN_LIST_PAGE_SIZE: "listPageSize",
  CRDFN_WATCH_SILENCE_SECONDS: "watchSilenceSeconds",
  CRDFN_LOG_LEVEL: "logLevel",
  CRDFN_KUBE_SERVER: "kube.server",
  CRDFN_KUBE_CA_FILE: "kube.caFile",
  CRDFN_KUBE_TOKEN_FILE: "kube.tokenFile",
  AWS_REGION: "aws.region",
  AWS_ENDPOINT_URL_SQS: "aws.endpoint",
};

/** How a variable's text becomes a value, where it is not the text itself. */
const envParsers: Readonly<Record<string, (text: string) => unknown>> = {
  CRDFN_RESOURCES: parseResourceList,
  CRDFN_NAMESPACES: list,
};

export const envVariableNames = Object.keys(envSettings);

function setPath(target: Record<string, unknown>, path: string[], value: unknown): void {
  let node = target;
  for (const key of path.slice(0, -1)) {
    const child = node[key];
    node = typeof child === "object" && child !== null ? (child as Record<string, unknown>) : (node[key] = {});
  }
  node[path[path.length - 1] ?? ""] = value;
}

/**
 * Builds the configuration from a parsed file (or {}) and the environment.
 * Throws ConfigError whose message has one line per bad setting.
 */
export function loadBridgeConfig(env: NodeJS.ProcessEnv, fileContent: unknown = {}, fileName = "config file"): BridgeConfig {
  if (typeof fileContent !== "object" || fileContent === null || Array.isArray(fileContent))
    throw new ConfigError(`${fileName}: must hold a mapping of settings`);
  const raw = structuredClone(fileContent) as Record<string, unknown>;
  const fromEnv = new Map<string, string>();
  const problems: string[] = [];
  for (const [name, dotted] of Object.entries(envSettings)) {
    const text = env[name];
    if (text === undefined || text === "") continue;
    try {
      setPath(raw, dotted.split("."), (envParsers[name] ?? String)(text));
      fromEnv.set(dotted, name);
    } catch (e) {
      problems.push(`${name}: ${(e as Error).message}`);
    }
  }
  const parsed = bridgeConfigSchema.safeParse(raw);
  if (parsed.success && problems.length === 0) return parsed.data;
  const lines = new Set<string>(problems);
  const reported = (name: string): boolean => problems.some((p) => p.startsWith(`${name}:`));
  for (const issue of parsed.error?.issues ?? []) {
    const path = issue.path.map(String);
    // Name the environment variable that set this value (or an ancestor of it), else the file path.
    let source: string | undefined;
    for (let i = path.length; i > 0 && source === undefined; i--) source = fromEnv.get(path.slice(0, i).join("."));
    const where = path
      .map((p) => (/^\d+$/.test(p) ? `[${p}]` : `.${p}`))
      .join("")
      .replace(/^\./, "");
    const missingEnv = Object.entries(envSettings).find(([, dotted]) => `${dotted}.`.startsWith(`${path.join(".")}.`))?.[0];
    const name =
      source !== undefined
        ? `${source}${path.length > 1 && source === "CRDFN_RESOURCES" ? ` (${where})` : ""}`
        : (missingEnv ?? `${fileName}: ${where || "(root)"}`);
    if (reported(name.split(/[: ]/)[0] ?? name)) continue;
    const message = /received undefined$/.test(issue.message) ? "is required" : issue.message;
    lines.add(`${name}: ${message}`);
  }
  throw new ConfigError([...lines].join("\n"));
}

/**
 * The cluster's event key, from CRDFN_EVENT_KEY (`<kid>:<secret>`, from a Kubernetes Secret in
 * the generated Deployment): every event is signed with it. Read apart from the settings above,
 * which a ConfigMap may hold and logs may show; the secret is never echoed.
 */
export function loadEventKey(env: NodeJS.ProcessEnv): EventKey {
  const text = env.CRDFN_EVENT_KEY;
  if (text === undefined || text.trim() === "")
    throw new ConfigError("CRDFN_EVENT_KEY: is required: the key the functions verify this cluster's events with, as <kid>:<secret> (see docs/security.md)");
  try {
    return parseEventKey(text.trim());
  } catch (e) {
    throw new ConfigError(`CRDFN_EVENT_KEY: ${(e as Error).message}`);
  }
}
