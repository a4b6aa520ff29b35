// The control plane and queue server a test file stands on. Under `npm run test:integration`
// that is a shared control plane (a lane, leased for the whole file) and the shared ElasticMQ,
// with namespaces and queues of the file's own; a file run by itself (`node --test <file>`), or
// one that stops or kills servers (`own`), starts its own as before.
//
// On a shared control plane a file must stay inside what is its own: its namespaces (every
// bridge it runs watches only them: `namespaces`), its queues, Leases and cluster-scoped names
// of its own. What it leaves behind is harmless to the next file: its namespaces are deleted when
// it releases the lane, and the admission policies it applied are removed when the next file
// takes the lane (they are cluster-scoped, and name the namespaces a previous file served).
import { basename } from "node:path";
import { DeleteQueueCommand, GetQueueAttributesCommand, SetQueueAttributesCommand } from "@aws-sdk/client-sqs";
import { KubeConfig } from "@kubernetes/client-node";
import { KubeHttp } from "../../clients/kube-http.ts";
import { untilAdmissionInForce } from "../../cli/local/admission-in-force.ts";
import { startCluster } from "../../emulator/cluster.ts";
import { sqsClient } from "../../clients/sqs-client.ts";
import { ensureQueues, queueDefinitions, queueEnv } from "../../emulator/queues.ts";
import type { LocalCluster, StartOptions } from "../../emulator/types.ts";
import { leaseLane } from "./lanes.ts";
import { readSharedServers } from "./shared-env.ts";
import { TEST_EVENT_KEY_ENV } from "./event-key.ts";

export interface TestCluster extends LocalCluster {
  /** This file's namespace: on a shared control plane, other files use others. */
  namespace: string;
  /** A further namespace of this file's: `<namespace>-<suffix>` (created when listed in `namespaces`). */
  ns(suffix: string): string;
  /** Every namespace of this file, for CRDFN_NAMESPACES: on a shared control plane a bridge must watch only these. */
  namespaces: string[];
  /** On the shared servers (which no test may stop), or on servers of its own. */
  shared: boolean;
}

export interface TestClusterOptions {
  /** The test file (`import.meta.filename`): it names the file's namespace and queues. */
  file: string;
  /** Further namespaces to create, by suffix (see ns()). */
  namespaces?: readonly string[];
  /**
   * Servers of its own, for a file that stops or kills them (outages, restarts), or whose API
   * server exports its spans (tracingEndpoint); with startCluster's options.
   */
  own?: boolean | Pick<StartOptions, "controllerManager" | "queue" | "tracingEndpoint">;
  /** No other file on the shared control planes meanwhile (it holds every lane). */
  alone?: boolean;
  /**
   * Receives before the event queue dead-letters a message (production and the emulator: 5). A
   * test of the dead-letter path may take fewer, so it does not wait out the whole retry backoff
   * (5 + 10 + 20 + 40 s); on servers of its own the emulator's queues keep 5.
   */
  maxReceiveCount?: number;
}

/** A DNS label from the file's name: `test/bridge-ha.test.ts` → `bridge-ha`. */
export function slugOf(file: string): string {
  return (
    basename(file)
      .replace(/\.test\.[cm]?[jt]s$/, "")
      .replace(/\.[cm]?[jt]s$/, "")
      .toLowerCase()
      .replace(/[^a-z0-9-]+/g, "-")
      .replace(/^-+|-+$/g, "")
      .slice(0, 40) || "test"
  );
}

export async function testCluster(o: TestClusterOptions): Promise<TestCluster> {
  const slug = slugOf(o.file);
  const ns = (suffix: string) => `${slug}-${suffix}`;
  const namespaces = [slug, ...(o.namespaces ?? []).map(ns)];
  const shared = o.own ? undefined : readSharedServers();
  if (!shared) {
    const cluster = await startCluster({ log: () => {}, ...(typeof o.own === "object" ? o.own : {}) });
    try {
      await createNamespaces(new KubeHttp({ connection: cluster.kubeConfig }), namespaces);
    } catch (e) {
      await cluster.stop();
      throw e;
    }
    return { ...cluster, env: { ...cluster.env, ...TEST_EVENT_KEY_ENV }, namespace: slug, ns, namespaces, shared: false };
  }

  const lease = await leaseLane(shared.lockDir, shared.lanes.length, { alone: o.alone ?? false });
  const lane = shared.lanes[lease.lanes[0] ?? 0]!;
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(lane.kubeconfigPath);
  const http = new KubeHttp({ connection: kubeConfig, timeoutMs: 30_000 });
  const sqsEnv = { ...shared.sqs, queues: { fifo: "", fifoDlq: "" } };
  const sqs = sqsClient(sqsEnv);
  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    // Not awaited to the end: a namespace whose objects carry finalizers nobody removes any more stays Terminating, harmlessly.
    await Promise.all(namespaces.map((n) => http.request("DELETE", `/api/v1/namespaces/${n}`).catch(() => undefined)));
    for (const url of Object.values(sqsEnv.queues)) if (url) await sqs.send(new DeleteQueueCommand({ QueueUrl: url })).catch(() => undefined);
    sqs.destroy();
    lease.release();
  };
  try {
    await removeAdmissionPolicies(http);
    await createNamespaces(http, namespaces);
    sqsEnv.queues = await ensureQueues(sqs, queueDefinitions(`${slug}-events`));
    if (o.maxReceiveCount !== undefined) {
      const dlq = await sqs.send(new GetQueueAttributesCommand({ QueueUrl: sqsEnv.queues.fifoDlq, AttributeNames: ["QueueArn"] }));
      const redrive = JSON.stringify({ deadLetterTargetArn: dlq.Attributes?.QueueArn, maxReceiveCount: o.maxReceiveCount });
      await sqs.send(new SetQueueAttributesCommand({ QueueUrl: sqsEnv.queues.fifo, Attributes: { RedrivePolicy: redrive } }));
    }
  } catch (e) {
    await stop();
    throw e;
  }
  const refuse = (what: string) => (): Promise<void> =>
    Promise.reject(
      new Error(`${slug} runs on the shared servers, which no test may stop (${what}): a test that stops servers starts its own, testCluster({ own: true })`),
    );
  const refusing = (what: string) => (): void => {
    throw new Error(
      `${slug} runs on the shared servers, which no test may stop (${what}): a test that stops servers starts its own, testCluster({ own: true })`,
    );
  };
  return {
    kubeconfigPath: lane.kubeconfigPath,
    kubeConfig,
    server: lane.server,
    kubectl: lane.kubectl,
    caPath: lane.caPath,
    sqs: sqsEnv,
    env: { KUBECONFIG: lane.kubeconfigPath, ...queueEnv(sqsEnv), ...TEST_EVENT_KEY_ENV },
    queue: { stop: refuse("the queue server"), start: refuse("the queue server"), pause: refusing("the queue server"), resume: refusing("the queue server") },
    apiServer: { stop: refuse("the API server"), start: refuse("the API server"), pause: refusing("the API server"), resume: refusing("the API server") },
    stop,
    namespace: slug,
    ns,
    namespaces,
    shared: true,
  };
}

async function createNamespaces(http: KubeHttp, names: readonly string[]): Promise<void> {
  for (const name of names) {
    const { status, text } = await http.request("POST", "/api/v1/namespaces", { body: { apiVersion: "v1", kind: "Namespace", metadata: { name } } });
    if (status >= 300 && status !== 409) throw new Error(`creating namespace ${name}: HTTP ${status} ${text.slice(0, 200)}`);
  }
}

const ADMISSION = "/apis/admissionregistration.k8s.io/v1";

/**
 * A previous file's admission policies (cluster-scoped, naming the namespaces it served) would
 * refuse this file's writes: delete them all, then wait until the API server has dropped them
 * (cli/local/admission-in-force.ts, as crdfn dev waits for the policies it writes).
 */
async function removeAdmissionPolicies(http: KubeHttp): Promise<void> {
  // A webhook a previous file registered (and whose server is gone) matches only its namespaces, but goes too.
  for (const kind of ["validatingwebhookconfigurations", "mutatingwebhookconfigurations"]) await http.request("DELETE", `${ADMISSION}/${kind}`);
  const list = await http.request("GET", `${ADMISSION}/validatingadmissionpolicies`);
  const items = (JSON.parse(list.text) as { items?: unknown[] }).items ?? [];
  if (items.length === 0) return;
  for (const kind of ["validatingadmissionpolicybindings", "validatingadmissionpolicies"]) {
    const r = await http.request("DELETE", `${ADMISSION}/${kind}`);
    if (r.status >= 300) throw new Error(`deleting the previous file's ${kind}: HTTP ${r.status} ${r.text.slice(0, 200)}`);
  }
  await untilAdmissionInForce(http, { probe: "crdfn-test-lane-probe", namespace: "default" });
}
