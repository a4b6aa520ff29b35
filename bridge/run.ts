// Runs the bridge as a process: builds the real clients from the environment (in-cluster
// ServiceAccount, or a kubeconfig), serves health and metrics, and on SIGTERM flushes what is
// buffered and releases the Lease before exiting 0.
import { readFileSync } from "node:fs";
import { sqsClient } from "../clients/sqs-client.ts";
import { boundedRequests } from "../clients/request-bounds.ts";
import { startTracing, tracingSettings, type TracingSettings } from "../clients/tracing.ts";
import { inClusterConnection, serverConnection, tokenFromFile, type KubeConnection } from "../clients/kube-connection.ts";
import { pino } from "pino";
import { collectDefaultMetrics, Registry } from "prom-client";
import { parse as parseYaml } from "yaml";
import { startBridge } from "./bridge.ts";
import { ConfigError } from "../core/config-error.ts";
import { loadBridgeConfig, loadEventKey, type BridgeConfig } from "./config.ts";
import type { EventKey } from "../core/event-auth.ts";
import { serveHealth } from "./health-server.ts";
import { pubSubPublisher, pubSubTransport } from "./pubsub-transport.ts";
import { sqsTransport } from "./sqs-transport.ts";
import type { QueueTransport } from "./transport.ts";

/**
 * How often prom-client's event-loop-delay histogram (nodejs_eventloop_lag_{min,max,mean,p50,
 * p90,p99}_seconds) samples. Its default of 10 ms woke an idle bridge 100 times a second: about
 * 0.9 % of a core, nearly all of its idle CPU; once a second costs ~0.02 %. Those values include
 * the interval (an idle loop reads ~1 s, not ~0.01 s), and a stall shorter than it is caught in
 * proportion to its length; nodejs_eventloop_lag_seconds, timed at each scrape, is unaffected.
 */
const EVENT_LOOP_SAMPLE_MS = 1000;

/** Documented in the README's configuration section. */
export const EXIT_CODES = { stopped: 0, config: 2 } as const;

export interface RunOptions {
  env: NodeJS.ProcessEnv;
  kubeconfig?: string;
  context?: string;
}

function readConfig(env: NodeJS.ProcessEnv): BridgeConfig {
  const file = env.CRDFN_CONFIG_FILE;
  if (file === undefined || file === "") return loadBridgeConfig(env);
  let content: unknown;
  try {
    content = parseYaml(readFileSync(file, "utf8"));
  } catch (e) {
    throw new ConfigError(`CRDFN_CONFIG_FILE: cannot read ${file}: ${(e as Error).message.split("\n")[0]}`);
  }
  return loadBridgeConfig(env, content ?? {}, file);
}

/** How to reach the API server, and where its credential comes from (named when the API server refuses it). */
async function connectionFor(o: RunOptions, kube: BridgeConfig["kube"]): Promise<{ connection: KubeConnection; source: string }> {
  if (o.kubeconfig === undefined && kube.server !== undefined && kube.tokenFile !== undefined) {
    return {
      connection: serverConnection({ server: kube.server, caFile: kube.caFile, token: tokenFromFile(kube.tokenFile, () => new Date()) }),
      source: `the token in ${kube.tokenFile} (CRDFN_KUBE_TOKEN_FILE) and its RBAC`,
    };
  }
  if (o.kubeconfig === undefined && o.env.KUBERNETES_SERVICE_HOST !== undefined && o.env.KUBECONFIG === undefined) {
    return {
      connection: inClusterConnection(o.env, () => new Date()),
      source: "the in-cluster ServiceAccount token (/var/run/secrets/kubernetes.io/serviceaccount/token) and the bridge's RBAC",
    };
  }
  // Only outside a pod: client-node stays unloaded in the deployed bridge (~23 MiB RSS).
  const { loadKubeconfig } = await import("../clients/kubeconfig.ts");
  const { kubeConfig, source } = loadKubeconfig(o.kubeconfig, o.context, o.env);
  return { connection: kubeConfig, source };
}

/** Resolves with the exit code once the bridge has stopped (on SIGTERM/SIGINT) or failed to start. */
export async function runBridgeProcess(o: RunOptions): Promise<number> {
  let config: BridgeConfig;
  let eventKey: EventKey;
  let traces: TracingSettings | undefined;
  try {
    config = readConfig(o.env);
    eventKey = loadEventKey(o.env);
    traces = tracingSettings(o.env, "crdfn-bridge");
  } catch (e) {
    if (!(e instanceof ConfigError)) throw e;
    process.stderr.write(`crdfn bridge: invalid configuration\n${e.message}\n`);
    return EXIT_CODES.config;
  }
  const logger = pino({ level: config.logLevel, base: { component: "crdfn-bridge" } });
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, eventLoopMonitoringPrecision: EVENT_LOOP_SAMPLE_MS });
  // SQS, or Pub/Sub (its client library loaded on the first publish): whichever the settings name.
  const sqs =
    config.queue.topic === undefined
      ? sqsClient(
          { region: config.aws.region, ...(config.aws.endpoint === undefined ? {} : { endpoint: config.aws.endpoint }) },
          { maxAttempts: 3, requestHandler: boundedRequests(3000, 15_000) },
        )
      : undefined;
  const transport: QueueTransport = sqs
    ? sqsTransport(sqs)
    : pubSubTransport(pubSubPublisher(config.pubsub.emulatorHost ? { apiEndpoint: config.pubsub.emulatorHost } : {}));
  const closeQueue = async () => {
    sqs?.destroy();
    await transport.close();
  };
  let kubeConfig: KubeConnection;
  let credentialSource: string;
  try {
    ({ connection: kubeConfig, source: credentialSource } = await connectionFor(o, config.kube));
  } catch (e) {
    await closeQueue();
    process.stderr.write(`crdfn bridge: cannot load the kubeconfig: ${(e as Error).message.split("\n")[0]}\n`);
    return EXIT_CODES.config;
  }
  const tracing = await startTracing(traces);
  const bridge = startBridge(config, {
    kubeConfig,
    transport,
    logger,
    registry,
    credentialSource,
    eventKey,
    ...(tracing.enabled ? { tracer: tracing.tracer } : {}),
  });
  let health: Awaited<ReturnType<typeof serveHealth>>;
  try {
    health = await serveHealth(bridge, config.httpPort);
  } catch (e) {
    await bridge.stop(0);
    await closeQueue();
    const code = (e as { code?: string }).code;
    const why = code === "EADDRINUSE" ? "is in use by another process" : code === "EACCES" ? "may not be bound by this user" : (e as Error).message;
    process.stderr.write(`crdfn bridge: CRDFN_HTTP_PORT: port ${config.httpPort} ${why}; choose another port\n`);
    return EXIT_CODES.config;
  }
  logger.info({ port: health.port, cluster: config.cluster, resources: config.resources.length, leaseName: config.lease.name ?? null }, "bridge started");
  void bridge.ready.then(() => logger.info("initial sync done"));

  const signal = await new Promise<NodeJS.Signals>((resolve) => {
    process.once("SIGTERM", () => resolve("SIGTERM"));
    process.once("SIGINT", () => resolve("SIGINT"));
  });
  logger.info({ signal }, "stopping: flushing buffered events and releasing the lease");
  await bridge.stop(10_000);
  await tracing.shutdown(2000);
  await health.close();
  await closeQueue();
  logger.info("stopped");
  return 0;
}
