// One call that brings up a real local Kubernetes control plane and SQS-compatible queue:
// what every integration test, `crdfn cluster up` and `crdfn dev` stand on.
import { join } from "node:path";
import { KubeConfig } from "@kubernetes/client-node";
import { sqsClient } from "../clients/sqs-client.ts";
import { controlPlaneBinaries, withSetupDefaults } from "./binaries.ts";
import { startApiServer, startControllerManager, startEtcd } from "./controlplane.ts";
import { elasticMqClasspath, startElasticMq } from "./elasticmq.ts";
import { writeKubeconfig } from "./kubeconfig.ts";
import { createPki } from "./pki.ts";
import { freePort } from "./ports.ts";
import type { RunningServer } from "./process.ts";
import { ensureQueues, queueDefinitions, queueEnv, queueUrlsAt } from "./queues.ts";
import { startScratch } from "./reaper.ts";
import { supervise } from "./supervisor.ts";
import type { LocalCluster, SqsEnvironment, StartOptions } from "./types.ts";

export type { LocalCluster, QueueUrls, SqsEnvironment, StartOptions } from "./types.ts";

export const REGION = "us-east-1";
// ElasticMQ ignores credentials; the SDK still wants some. Not secrets.
const LOCAL_CREDENTIALS = { accessKeyId: "local", secretAccessKey: "local" };

export async function startCluster(opts: StartOptions = {}): Promise<LocalCluster> {
  const { env, log } = withSetupDefaults(opts);
  const withQueue = opts.queue ?? true;
  /** A server as started, or kept running (opts.supervise) by starting it again the same way. */
  const kept = async (start: () => Promise<RunningServer>): Promise<RunningServer> => {
    const first = await start();
    return opts.supervise ? supervise(first, start, { say: opts.supervise }) : first;
  };
  const externalSqs = env.CRDFN_SQS_ENDPOINT;

  // Resolve (and on a first run, build) before anything is started, so a missing tool fails fast.
  const classpath = withQueue && !externalSqs ? elasticMqClasspath(env, log) : undefined;
  const bins = await controlPlaneBinaries({ env, log });
  const withControllerManager = (opts.controllerManager ?? true) && bins.kubeControllerManager !== undefined;
  if ((opts.controllerManager ?? true) && !withControllerManager) {
    log(`no kube-controller-manager in ${bins.source}: owned children will not be garbage-collected`);
  }

  const scratch = startScratch("crdfn");
  const { dir, reaper } = scratch;
  const servers: RunningServer[] = [];
  const stopAll = async () => {
    // Reverse order: nothing should outlive what it depends on.
    for (const s of servers.splice(0).reverse()) await s.stop();
    await scratch.remove();
  };

  try {
    const [etcdPort, peerPort, apiPort, sqsPort] = await Promise.all([freePort(), freePort(), freePort(), freePort()]);
    const pki = await createPki(dir);
    const defs = queueDefinitions();
    const storage = opts.queueStorage ?? "disk";
    const startQueue = classpath
      ? () => kept(() => startElasticMq({ classpath, dir: join(dir, "elasticmq"), port: sqsPort, queues: defs, reaper, region: REGION, storage }))
      : undefined;

    log(`starting etcd, kube-apiserver ${bins.kubernetesVersion}${startQueue ? " and ElasticMQ" : ""}…`);
    const queuePromise = startQueue?.();
    const etcd = await kept(() => startEtcd(bins, dir, etcdPort, peerPort, reaper));
    servers.push(etcd);
    const tracing = opts.tracingEndpoint ? { tracingEndpoint: opts.tracingEndpoint } : {};
    const startApi = () => kept(() => startApiServer({ bins, dir, pki, etcdPort: etcdPort, port: apiPort, reaper, ...tracing }));
    let api = await startApi();
    servers.push(api);
    let queue = queuePromise ? await queuePromise : undefined;
    if (queue) servers.push(queue);

    const server = `https://127.0.0.1:${apiPort}`;
    const kubeconfigPath = join(dir, "kubeconfig");
    writeKubeconfig(kubeconfigPath, {
      server,
      caPem: pki.pem.ca,
      user: { clientCertPem: pki.pem.adminCert, clientKeyPem: pki.pem.adminKey },
    });
    if (withControllerManager) {
      servers.push(await kept(() => startControllerManager({ bins, dir, pki, kubeconfigPath, apiPort: apiPort, reaper })));
    }
    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromFile(kubeconfigPath);

    const sqs = await sqsEnvironment(externalSqs ?? `http://127.0.0.1:${sqsPort}`, !!externalSqs, defs);
    const restartable = (get: () => RunningServer | undefined, set: (s: RunningServer) => void, start?: () => Promise<RunningServer>) => ({
      stop: async (graceMs?: number) => {
        const s = get();
        if (!s) throw new Error("not running here");
        await s.stop(graceMs);
        servers.splice(servers.indexOf(s), 1);
      },
      start: async () => {
        if (!start) throw new Error("cannot be started here (an external endpoint)");
        const s = await start();
        servers.push(s);
        set(s);
      },
      pause: () => running(get()).signal("SIGSTOP"),
      resume: () => running(get()).signal("SIGCONT"),
    });
    const running = (s: RunningServer | undefined): RunningServer => {
      if (!s) throw new Error("not running here");
      return s;
    };

    return {
      kubeconfigPath,
      kubeConfig,
      server,
      kubectl: bins.kubectl,
      caPath: pki.caCert,
      sqs,
      env: { KUBECONFIG: kubeconfigPath, ...queueEnv(sqs) },
      queue: restartable(
        () => queue,
        (s) => (queue = s),
        startQueue,
      ),
      apiServer: restartable(
        () => api,
        (s) => (api = s),
        startApi,
      ),
      stop: stopAll,
    };
  } catch (e) {
    await stopAll();
    throw e;
  }
}

export async function sqsEnvironment(endpoint: string, external: boolean, defs: ReturnType<typeof queueDefinitions>): Promise<SqsEnvironment> {
  const base = { endpoint, region: REGION, ...LOCAL_CREDENTIALS };
  if (!external) return { ...base, queues: queueUrlsAt(endpoint, defs) };
  const client = sqsClient(base);
  try {
    return { ...base, queues: await ensureQueues(client, defs) };
  } finally {
    client.destroy();
  }
}
