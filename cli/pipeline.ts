// The whole crdfn pipeline on one machine — bridge, queue, poller, reconcile runtimes — over
// an environment from the emulator. `crdfn dev`, the benchmark and the end-to-end tests of a
// user's operator all run this, so what they show is what they share.
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { KubernetesObjectApi, PatchStrategy, loadYaml, type KubernetesObject } from "@kubernetes/client-node";
import type { Logger } from "pino";
import { parse as parseYaml } from "yaml";
import { parseKeyEvent } from "../core/event.ts";
import type { Operator } from "../core/operator.ts";
import { startBridge, type RunningBridge } from "../bridge/bridge.ts";
import { bundleBridge } from "./bundle.ts";
import { loadBridgeConfig } from "../bridge/config.ts";
import { sqsClient, type LocalCluster } from "../emulator/cluster.ts";
import { packageRoot } from "../emulator/paths.ts";
import { freePort } from "../emulator/ports.ts";
import { startServer, type RunningServer } from "../emulator/process.ts";
import { startReaper } from "../emulator/reaper.ts";
import { startPoller } from "../functions/adapters/poller.ts";
import { crdFiles } from "../core/operator-crd.ts";
import { buildFromEnv } from "../functions/runtime/entry.ts";
import type { QueueMessage } from "../functions/runtime/message.ts";
import type { HandledOutcome, Runtime } from "../functions/runtime/runtime.ts";

/** One reconcile as a person watching `crdfn dev` sees it. */
export interface ReconcileRecord {
  kind: string;
  namespace?: string;
  name: string;
  reason?: string;
  outcome: HandledOutcome;
  latencyMs: number;
}

export const DEFAULT_RECEIVE_LOOPS = 4;

export interface PipelineOptions {
  cluster: LocalCluster;
  operators: ReadonlyArray<Operator<unknown>>;
  logger: Logger;
  /** Cluster name the bridge puts in every event. */
  clusterName?: string;
  onReconcile?: (r: ReconcileRecord) => void;
  /** Function log level (their own pino loggers). Default "warn". */
  functionLogLevel?: string;
  /** Re-announce every object this often (seconds, 0 = never). Default 600. */
  resyncSeconds?: number;
  /**
   * Run the bridge as its own process, as its image runs it (the bundle, under the deployment's
   * NODE_OPTIONS), instead of in this one, so its memory and CPU can be measured apart (the
   * benchmark). Default false.
   */
  bridgeProcess?: boolean;
  /**
   * Concurrent receive loops on the FIFO event queue, like Lambda running several batches of
   * one queue at once. The queue never hands out a message of a group (an object) while
   * another of that group is in flight, so per-object order holds. One loop waits for the
   * slowest reconcile of each batch before receiving again, which caps a busy machine at a few
   * dozen reconciles/s (see `npm run bench`). Default DEFAULT_RECEIVE_LOOPS.
   */
  receiveLoops?: number;
}

export interface Pipeline {
  bridge: RunningBridge;
  stop(): Promise<void>;
}

/** A bridge running as its own process, answering /healthz, /readyz and /metrics on `httpPort`. */
export interface BridgeProcess {
  pid: number;
  httpPort: number;
  logFile: string;
}

export interface ProcessPipeline {
  bridgeProcess: BridgeProcess;
  stop(): Promise<void>;
}

/** Installs (server-side apply) each operator's generated CRD and waits until it is served. */
export async function installCrds(cluster: LocalCluster, operators: ReadonlyArray<Operator<unknown>>): Promise<void> {
  const api = KubernetesObjectApi.makeApiClient(cluster.kubeConfig);
  for (const text of crdFiles(operators).values()) {
    // loadYaml yields client-node's typed model; a plain object would lose the
    // `x-kubernetes-*` keys in its serializer (status would then be pruned to {}).
    const crd = loadYaml<KubernetesObject>(text);
    await api.patch(crd, undefined, undefined, "crdfn-dev", true, PatchStrategy.ServerSideApply);
  }
  for (const op of operators) {
    const name = `${op.resource.plural}.${op.resource.group}`;
    for (let i = 0; ; i++) {
      const crd = (await api.read({ apiVersion: "apiextensions.k8s.io/v1", kind: "CustomResourceDefinition", metadata: { name } })) as {
        status?: { conditions?: { type: string; status: string }[] };
      };
      if (crd.status?.conditions?.some((c) => c.type === "Established" && c.status === "True")) break;
      if (i > 300) throw new Error(`CRD ${name} was not Established within 30s`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

/** The bridge's CRDFN_RESOURCES syntax for these operators and the kinds they own. */
export function bridgeResources(operators: ReadonlyArray<Operator<unknown>>): string {
  const ref = (group: string, version: string, plural: string) => `${group || "core"}/${version}/${plural}`;
  return operators
    .map((op) => {
      const parent = ref(op.resource.group, op.resource.version, op.resource.plural);
      const owned = op.owns.map((o) => ref(o.group, o.version, o.plural));
      return owned.length ? `${parent}>${owned.join("+")}` : parent;
    })
    .join(",");
}

/** Reports each reconcile the runtime handles, for the live lines of `crdfn dev` and the benchmark. */
export function observed(runtime: Runtime, onReconcile?: (r: ReconcileRecord) => void): Runtime {
  if (!onReconcile) return runtime;
  return {
    async handle(message: QueueMessage): Promise<HandledOutcome> {
      const started = performance.now();
      const outcome = await runtime.handle(message);
      const parsed = parseKeyEvent(message.body);
      if (parsed.ok) {
        const e = parsed.event;
        onReconcile({
          kind: e.kind,
          ...(e.namespace ? { namespace: e.namespace } : {}),
          name: e.name,
          ...(e.reason ? { reason: e.reason } : {}),
          outcome,
          latencyMs: performance.now() - started,
        });
      }
      return outcome;
    },
  };
}

/** The bridge's settings, as the CRDFN_* environment its process entry reads. */
function bridgeEnv(o: PipelineOptions): Record<string, string> {
  const { endpoint, region, queues } = o.cluster.sqs;
  return {
    CRDFN_CLUSTER: o.clusterName ?? "local",
    CRDFN_QUEUE_URL: queues.fifo,
    CRDFN_RESOURCES: bridgeResources(o.operators),
    CRDFN_RESYNC_SECONDS: String(o.resyncSeconds ?? 600),
    AWS_REGION: region,
    AWS_ENDPOINT_URL_SQS: endpoint,
  };
}

/** NODE_OPTIONS as infra/bridge/deployment.yaml gives the bridge container ("" if it sets none). */
export function shippedBridgeNodeOptions(): string {
  const deployment = parseYaml(readFileSync(join(packageRoot, "infra", "bridge", "deployment.yaml"), "utf8")) as {
    spec?: { template?: { spec?: { containers?: { env?: { name: string; value?: string }[] }[] } } };
  };
  const env = deployment.spec?.template?.spec?.containers?.[0]?.env ?? [];
  return env.find((e) => e.name === "NODE_OPTIONS")?.value ?? "";
}

/**
 * Starts the bridge as its image runs it — the bundle (cli/bundle.ts) under the deployment's
 * NODE_OPTIONS — against the cluster, and waits for its /readyz (initial sync done).
 */
async function spawnBridge(o: PipelineOptions): Promise<BridgeProcess & { stop(): Promise<void> }> {
  const dir = mkdtempSync(join(tmpdir(), "crdfn-bridge-"));
  const reaper = startReaper();
  reaper.trackDir(dir);
  const entry = join(dir, "bridge.mjs");
  const httpPort = await freePort();
  const logFile = join(dir, "bridge.log");
  let server: RunningServer;
  try {
    await bundleBridge(entry);
    server = await startServer(
      {
        name: "crdfn bridge",
        command: process.execPath,
        args: [entry],
        logFile,
        env: {
          ...process.env,
          ...o.cluster.env,
          ...bridgeEnv(o),
          CRDFN_HTTP_PORT: String(httpPort),
          CRDFN_LOG_LEVEL: o.logger.level === "silent" ? "fatal" : o.logger.level,
          NODE_OPTIONS: shippedBridgeNodeOptions(),
        },
        ready: async () => (await fetch(`http://127.0.0.1:${httpPort}/readyz`)).ok,
        timeoutMs: 60_000,
      },
      reaper,
    );
  } catch (e) {
    await reaper.release();
    throw e;
  }
  return {
    pid: server.pid,
    httpPort,
    logFile,
    async stop() {
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
      await reaper.release();
    },
  };
}

export function startPipeline(o: PipelineOptions & { bridgeProcess: true }): Promise<ProcessPipeline>;
export function startPipeline(o: PipelineOptions & { bridgeProcess?: false }): Promise<Pipeline>;
export async function startPipeline(o: PipelineOptions): Promise<Pipeline | ProcessPipeline> {
  await installCrds(o.cluster, o.operators);
  const { queues } = o.cluster.sqs;
  const sqs = sqsClient(o.cluster.sqs);
  // Validated here in either mode, so a bad setting fails before anything is started.
  const bridgeConfig = loadBridgeConfig(bridgeEnv(o));

  const functionEnv = { ...process.env, ...o.cluster.env, LOG_LEVEL: o.functionLogLevel ?? "warn", CRDFN_KUBE_AUTH: "kubeconfig" };
  // One function process serving every operator, dispatching by the resource each event names.
  const functions = buildFromEnv(o.operators, functionEnv);
  const poller = startPoller({
    sqs,
    queueUrls: [...Array.from({ length: o.receiveLoops ?? DEFAULT_RECEIVE_LOOPS }, () => queues.fifo), queues.standard],
    runtime: observed(functions.runtime, o.onReconcile),
    waitTimeSeconds: 1,
    logger: o.logger.child({ part: "poller" }),
    clock: functions.clock,
    ...(functions.requeuer ? { requeuer: functions.requeuer } : {}),
  });
  const stopFunctions = async () => {
    await poller.stop();
    functions.sqs.destroy();
    sqs.destroy();
  };

  if (o.bridgeProcess) {
    const bridgeProcess = await spawnBridge(o).catch(async (e: unknown) => {
      await stopFunctions();
      throw e;
    });
    return {
      bridgeProcess: { pid: bridgeProcess.pid, httpPort: bridgeProcess.httpPort, logFile: bridgeProcess.logFile },
      async stop() {
        await bridgeProcess.stop();
        await stopFunctions();
      },
    };
  }
  const bridge = startBridge(bridgeConfig, { kubeConfig: o.cluster.kubeConfig, sqs, logger: o.logger.child({ part: "bridge" }) });
  await bridge.ready;
  return {
    bridge,
    async stop() {
      await bridge.stop();
      await stopFunctions();
    },
  };
}
