// Shared by the bridge's integration tests: raw API requests, the CronTab CRD, a queue reader
// that drains and remembers every key event, and a bridge run as a real child process.
import { spawn, execFileSync, type ChildProcess } from "node:child_process";
import https from "node:https";
import { once } from "node:events";
import { connect, createServer, type AddressInfo, type Server, type Socket } from "node:net";
import { DeleteMessageBatchCommand, ReceiveMessageCommand, type SQSClient } from "@aws-sdk/client-sqs";
import { KubeConfig } from "@kubernetes/client-node";
import type { Registry } from "prom-client";
import { pino, type Logger } from "pino";
import { parseKeyEvent, type KeyEvent } from "../core/event.ts";
import { loadBridgeConfig, type BridgeConfig } from "../bridge/config.ts";
import { sqsClient, startCluster } from "../emulator/cluster.ts";
import type { LocalCluster } from "../emulator/types.ts";

export const CRONTABS = "/apis/stable.example.com/v1";
export const CRONTAB_RESOURCE = "stable.example.com/v1/crontabs>batch/v1/cronjobs";

export interface Reply {
  status: number;
  body: Record<string, unknown> & { metadata?: { resourceVersion?: string; uid?: string; name?: string } };
}

/** One API request with the kubeconfig's identity; JSON in, JSON out. */
export async function kube(kc: KubeConfig, method: string, path: string, body?: unknown, contentType = "application/json"): Promise<Reply> {
  const server = kc.getCurrentCluster()?.server ?? "";
  const opts: https.RequestOptions = { method, headers: { Accept: "application/json", ...(body === undefined ? {} : { "Content-Type": contentType }) } };
  await kc.applyToHTTPSOptions(opts);
  return new Promise((resolve, reject) => {
    const req = https.request(new URL(server + path), opts, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (c: string) => (text += c));
      res.on("end", () => {
        let parsed: Reply["body"];
        try {
          parsed = text === "" ? {} : (JSON.parse(text) as Reply["body"]);
        } catch {
          parsed = { message: text };
        }
        resolve({ status: res.statusCode ?? 0, body: parsed });
      });
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end(body === undefined ? undefined : JSON.stringify(body));
  });
}

export async function ok(reply: Promise<Reply>, what: string): Promise<Reply> {
  const r = await reply;
  if (r.status >= 300) throw new Error(`${what}: HTTP ${r.status} ${JSON.stringify(r.body).slice(0, 300)}`);
  return r;
}

export const rvOf = (r: Reply): string => r.body.metadata?.resourceVersion ?? "";

export function kubectl(cluster: LocalCluster, ...args: string[]): string {
  return execFileSync(cluster.kubectl, ["--kubeconfig", cluster.kubeconfigPath, ...args], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
}

export function installCrontabCrd(cluster: LocalCluster): void {
  kubectl(cluster, "apply", "--server-side", "-f", "infra/crds/crontabs.stable.example.com.yaml");
  kubectl(cluster, "wait", "--for=condition=Established", "--timeout=30s", "crd/crontabs.stable.example.com");
}

export async function createNamespace(cluster: LocalCluster, name: string): Promise<void> {
  await ok(kube(cluster.kubeConfig, "POST", "/api/v1/namespaces", { apiVersion: "v1", kind: "Namespace", metadata: { name } }), `namespace ${name}`);
}

export function crontab(name: string, replicas = 1): unknown {
  return { apiVersion: "stable.example.com/v1", kind: "CronTab", metadata: { name }, spec: { cronSpec: "*/5 * * * *", image: "busybox", replicas } };
}

export const crontabPath = (ns: string, name?: string): string => `${CRONTABS}/namespaces/${ns}/crontabs${name === undefined ? "" : `/${name}`}`;

/** Runs `fn` over `items` with at most `concurrency` at a time. */
export async function parallel<T, R>(items: readonly T[], concurrency: number, fn: (item: T, index: number) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array<R>(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(concurrency, items.length) }, async () => {
      while (next < items.length) {
        const i = next++;
        out[i] = await fn(items[i] as T, i);
      }
    }),
  );
  return out;
}

/** Fails fast while the queue is down (outage tests), instead of the SDK's long retries. */
export function sqsClientFor(cluster: LocalCluster): SQSClient {
  return sqsClient(cluster.sqs, { maxAttempts: 2, requestHandler: { connectionTimeout: 2000, requestTimeout: 10_000 } });
}

/** What every bridge test file stands on: a cluster with the CronTab CRD and a queue client. */
export async function startBridgeEnvironment(): Promise<{ cluster: LocalCluster; sqs: SQSClient; stop(): Promise<void> }> {
  const cluster = await startCluster({ log: () => {} });
  installCrontabCrd(cluster);
  const sqs = sqsClientFor(cluster);
  return {
    cluster,
    sqs,
    async stop() {
      sqs.destroy();
      await cluster.stop();
    },
  };
}

export function testLogger(): Logger {
  return pino({ level: process.env.CRDFN_TEST_LOG ?? "silent" });
}

/** Environment for a bridge pointed at the test cluster and its FIFO queue. */
export function bridgeEnv(cluster: LocalCluster, extra: Record<string, string> = {}): Record<string, string> {
  return {
    KUBECONFIG: cluster.kubeconfigPath,
    CRDFN_CLUSTER: "test",
    CRDFN_QUEUE_URL: cluster.sqs.queues.fifo,
    CRDFN_RESOURCES: CRONTAB_RESOURCE,
    CRDFN_RESYNC_SECONDS: "0",
    CRDFN_HTTP_PORT: "0",
    AWS_REGION: cluster.sqs.region,
    AWS_ENDPOINT_URL_SQS: cluster.sqs.endpoint,
    AWS_ACCESS_KEY_ID: cluster.sqs.accessKeyId,
    AWS_SECRET_ACCESS_KEY: cluster.sqs.secretAccessKey,
    ...extra,
  };
}

export function bridgeConfig(cluster: LocalCluster, extra: Record<string, string> = {}): BridgeConfig {
  return loadBridgeConfig(bridgeEnv(cluster, extra));
}

export interface Received {
  event: KeyEvent;
  groupId: string;
  dedupId: string;
}

/** Drains a queue (receive + delete) and keeps every event, in per-group delivery order. */
export class QueueReader {
  readonly all: Received[] = [];
  readonly #sqs: SQSClient;
  readonly #url: string;
  constructor(sqs: SQSClient, url: string) {
    this.#sqs = sqs;
    this.#url = url;
  }

  /** Receives until a receive comes back empty; returns how many arrived. */
  async drain(): Promise<number> {
    let got = 0;
    for (;;) {
      const out = await this.#sqs.send(
        new ReceiveMessageCommand({ QueueUrl: this.#url, MaxNumberOfMessages: 10, WaitTimeSeconds: 0, VisibilityTimeout: 60, MessageSystemAttributeNames: ["All"] }),
      );
      const msgs = out.Messages ?? [];
      if (msgs.length === 0) return got;
      for (const m of msgs) {
        const parsed = parseKeyEvent(m.Body ?? "");
        if (!parsed.ok) throw new Error(`queue holds a message outside the contract: ${parsed.error}`);
        this.all.push({ event: parsed.event, groupId: m.Attributes?.MessageGroupId ?? "", dedupId: m.Attributes?.MessageDeduplicationId ?? "" });
      }
      got += msgs.length;
      await this.#sqs.send(new DeleteMessageBatchCommand({ QueueUrl: this.#url, Entries: msgs.map((m, i) => ({ Id: `d${i}`, ReceiptHandle: m.ReceiptHandle })) }));
    }
  }

  /** Drains repeatedly until `done()` holds; throws with `describe()` after the deadline. */
  async until(done: () => boolean, timeoutMs: number, describe: () => string = () => ""): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      await this.drain();
      if (done()) return;
      if (Date.now() > deadline) throw new Error(`queue did not reach the expected state in ${timeoutMs} ms: ${describe()}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  /** Events per object name (one namespace), in delivery order. */
  byName(namespace: string): Map<string, KeyEvent[]> {
    const m = new Map<string, KeyEvent[]>();
    for (const { event } of this.all) {
      if (event.namespace !== namespace) continue;
      const list = m.get(event.name) ?? [];
      list.push(event);
      m.set(event.name, list);
    }
    return m;
  }
}

/** What an object's last event must say. */
export type Expected = { deleted: true } | { deleted: false; resourceVersion: string };

/** Names whose last event does not match, with what was seen. */
export function mismatches(events: Map<string, KeyEvent[]>, expected: Map<string, Expected>): string[] {
  const bad: string[] = [];
  for (const [name, want] of expected) {
    const last = events.get(name)?.at(-1);
    const good = last !== undefined && (want.deleted ? last.type === "DELETED" : last.type !== "DELETED" && last.resourceVersion === want.resourceVersion);
    if (!good) bad.push(`${name}: want ${want.deleted ? "DELETED" : want.resourceVersion}, last ${last === undefined ? "none" : `${last.type}@${last.resourceVersion}`}`);
  }
  return bad;
}

/** Per-object order: resourceVersions never go backwards within an object's events. */
export function orderViolations(events: Map<string, KeyEvent[]>): string[] {
  const bad: string[] = [];
  for (const [name, list] of events) {
    for (let i = 1; i < list.length; i++) {
      const a = list[i - 1];
      const b = list[i];
      if (a !== undefined && b !== undefined && BigInt(b.resourceVersion) < BigInt(a.resourceVersion)) bad.push(`${name}: ${a.resourceVersion} then ${b.resourceVersion}`);
    }
  }
  return bad;
}

export interface BridgeProcess {
  child: ChildProcess;
  /** Resolves with the health port once the process logged "bridge started". */
  port: Promise<number>;
  /** Resolves once the process logged "initial sync done". */
  synced: Promise<void>;
  exited: Promise<number | null>;
  logs: string[];
}

/** Runs `node bridge/main.ts` (or a bundle of it) as a separate process, as the container does. */
export function spawnBridge(env: Record<string, string>, entry = "bridge/main.ts"): BridgeProcess {
  const child = spawn(process.execPath, [entry], { env: { PATH: process.env.PATH ?? "", ...env }, stdio: ["ignore", "pipe", "pipe"] });
  const logs: string[] = [];
  let resolvePort: (p: number) => void = () => undefined;
  let resolveSynced: () => void = () => undefined;
  const port = new Promise<number>((r) => (resolvePort = r));
  const synced = new Promise<void>((r) => (resolveSynced = r));
  let rest = "";
  child.stdout.setEncoding("utf8");
  child.stdout.on("data", (chunk: string) => {
    const lines = (rest + chunk).split("\n");
    rest = lines.pop() ?? "";
    for (const line of lines) {
      logs.push(line);
      try {
        const rec = JSON.parse(line) as { msg?: string; port?: number };
        if (rec.msg === "bridge started" && rec.port !== undefined) resolvePort(rec.port);
        if (rec.msg === "initial sync done") resolveSynced();
      } catch {
        // not a log record
      }
    }
  });
  child.stderr.setEncoding("utf8");
  child.stderr.on("data", (chunk: string) => logs.push(chunk));
  const exited = once(child, "exit").then(([code]) => code as number | null);
  return { child, port, synced, exited, logs };
}

export function withTimeout<T>(p: Promise<T>, ms: number, what: string | (() => string)): Promise<T> {
  let t: NodeJS.Timeout | undefined;
  const describe = typeof what === "string" ? () => what : what;
  return Promise.race([p, new Promise<never>((_, reject) => (t = setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${describe()}`)), ms)))]).finally(() => clearTimeout(t));
}

/** A TCP relay in front of the API server that a test can cut and restore: the bridge "goes away". */
export class Relay {
  readonly #target: number;
  readonly #sockets = new Set<Socket>();
  #server: Server | undefined;
  port = 0;
  constructor(targetPort: number) {
    this.#target = targetPort;
  }
  async open(): Promise<void> {
    const server = createServer((down) => {
      const up = connect(this.#target, "127.0.0.1");
      for (const s of [down, up]) {
        this.#sockets.add(s);
        s.on("close", () => this.#sockets.delete(s));
        s.on("error", () => (down.destroy(), up.destroy()));
      }
      down.pipe(up);
      up.pipe(down);
    });
    await new Promise<void>((resolve) => server.listen(this.port, "127.0.0.1", resolve));
    this.port = (server.address() as AddressInfo).port;
    this.#server = server;
  }
  async cut(): Promise<void> {
    const server = this.#server;
    this.#server = undefined;
    for (const s of this.#sockets) s.destroy();
    if (server !== undefined) await new Promise((resolve) => server.close(resolve));
  }
}

/** The same identity as `kc`, reaching the API server through another port. */
export function kubeConfigVia(kc: KubeConfig, port: number): KubeConfig {
  const copy = new KubeConfig();
  copy.loadFromOptions({
    clusters: kc.clusters.map((c) => ({ ...c, server: `https://127.0.0.1:${port}` })),
    users: kc.users,
    contexts: kc.contexts,
    currentContext: kc.currentContext,
  });
  return copy;
}

/** Reads one sample of a counter or gauge from a Prometheus registry. */
export async function metricValue(registry: Registry, name: string, labels: Record<string, string> = {}): Promise<number> {
  const metric = await registry.getSingleMetric(name)?.get();
  return (metric?.values ?? [])
    .filter((v) => Object.entries(labels).every(([k, val]) => (v.labels as Record<string, unknown>)[k] === val))
    .reduce((n, v) => n + v.value, 0);
}

/** Scrapes a bridge's /metrics: each metric name → the sum of its samples. */
export async function scrapeMetrics(port: number): Promise<Map<string, number>> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const out = new Map<string, number>();
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const name = line.split(/[{ ]/)[0] ?? "";
    out.set(name, (out.get(name) ?? 0) + Number(line.split(" ").at(-1)));
  }
  return out;
}
