// Where `npm run bench` runs the pipeline, as `crdfn dev --target <target>` runs it: AWS's target
// (ElasticMQ, the poller standing in for Lambda's event source) or Cloud Run's (the Pub/Sub
// emulator, the push deliverer and functions-framework: cli/local/cloud-run.ts). What differs for
// the benchmark is here alone: the servers, the hook that counts the consumer's requests, the
// queue server's process, and how to tell that the queue holds nothing.
import type { FunctionTarget } from "../cli/local/dev-target.ts";
import { LOCAL_MAX_DELIVERY_ATTEMPTS } from "../cli/local/cloud-run.ts";
import type { PipelineOptions } from "../cli/local/pipeline.ts";
import { sqsClient } from "../clients/sqs-client.ts";
import { startCluster, type LocalCluster } from "../emulator/cluster.ts";
import { startLocalPubSub } from "../emulator/pubsub.ts";
import type { PushRecord } from "../emulator/pubsub-push.ts";
import { BRIDGE_METRICS, metricSum, pubSubEmulatorPid } from "./proc.ts";
import { untilQueuesEmpty } from "./queue-depth.ts";

export interface BenchTarget {
  name: FunctionTarget;
  cluster: LocalCluster;
  /** The queue's part of startPipeline's options, with the hook that counts the consumer's requests. */
  pipeline: Pick<PipelineOptions, "queue" | "pubsub" | "onQueueRequest" | "onPush">;
  /** The queue server's process, by name, when it is not the cluster's (the Pub/Sub emulator). */
  queueServer: Record<string, number>;
  /** The bridge's send counter's name in the per-phase request counts: a billed SQS request, or a batch handed to the Pub/Sub client. */
  bridgeSends: string;
  /** The consumer's requests to the queue so far, by name (Cloud Run's pushes are records: `onPush`). */
  requests(): Record<string, number>;
  /** Resolves with the seconds waited once the queue has held nothing twice in a row; throws after `timeoutMs`. */
  quiet(bridgeMetricsUrl: string, timeoutMs: number): Promise<number>;
  stop(): Promise<void>;
}

/** Starts the control plane and the target's queue. `onPush`: each push request of the Cloud Run target. */
export async function startBenchTarget(name: FunctionTarget, onPush: (p: PushRecord) => void): Promise<BenchTarget> {
  return name === "cloudrun" ? cloudRunTarget(onPush) : lambdaTarget();
}

async function lambdaTarget(): Promise<BenchTarget> {
  const cluster = await startCluster({ log: () => {} });
  const counted: Record<string, number> = {};
  const sqs = sqsClient(cluster.sqs);
  return {
    name: "lambda",
    cluster,
    pipeline: { queue: cluster.sqs, onQueueRequest: (command) => (counted[command] = (counted[command] ?? 0) + 1) },
    queueServer: {},
    bridgeSends: "bridge SendMessageBatch",
    requests: () => ({ ...counted }),
    quiet: (_metrics, timeoutMs) => untilQueuesEmpty(sqs, [cluster.sqs.queues.fifo], timeoutMs),
    async stop() {
      sqs.destroy();
      await cluster.stop();
    },
  };
}

/**
 * Pub/Sub has no queue depth to ask (its backlog is a Cloud Monitoring metric; the emulator has
 * none), so the queue is empty when every message the bridge has published (its counter) has been
 * pushed to an answer that ends it (acknowledged, or refused for the last time before the
 * dead-letter topic) and the bridge holds nothing to publish.
 */
async function cloudRunTarget(onPush: (p: PushRecord) => void): Promise<BenchTarget> {
  const [cluster, pubsub] = await Promise.all([startCluster({ log: () => {}, queue: false }), startLocalPubSub({ log: () => {} })]);
  let ended = 0;
  const emulator = pubSubEmulatorPid(pubsub.host);
  return {
    name: "cloudrun",
    cluster,
    pipeline: {
      pubsub,
      onPush: (p) => {
        if (p.acked || p.attempt >= LOCAL_MAX_DELIVERY_ATTEMPTS) ended++;
        onPush(p);
      },
    },
    queueServer: emulator === undefined ? {} : { pubSubEmulator: emulator },
    bridgeSends: "bridge publish",
    requests: () => ({}),
    async quiet(bridgeMetricsUrl, timeoutMs) {
      const started = performance.now();
      let empty = 0;
      while (empty < 2) {
        const text = await (await fetch(bridgeMetricsUrl)).text();
        const published = metricSum(text, BRIDGE_METRICS.published);
        const pending = metricSum(text, BRIDGE_METRICS.pending);
        empty = pending === 0 && ended >= published ? empty + 1 : 0;
        if (performance.now() - started > timeoutMs)
          throw new Error(`after ${timeoutMs / 1000} s, ${published - ended} published messages were not yet pushed to an end, ${pending} to publish`);
        if (empty < 2) await new Promise((r) => setTimeout(r, 200));
      }
      return Math.round((performance.now() - started) / 100) / 10;
    },
    async stop() {
      await pubsub.stop();
      await cluster.stop();
    },
  };
}
