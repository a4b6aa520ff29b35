// What a started local environment hands to tests, the CLI and the emulator.
import type { KubeConfig } from "@kubernetes/client-node";

/** Queue URLs of the queues crdfn uses: one FIFO event queue (one ordered stream per object) and its DLQ. */
export interface QueueUrls {
  /** FIFO event queue (`crdfn-events.fifo`), dead-lettering to `fifoDlq` after 5 receives. */
  fifo: string;
  fifoDlq: string;
}

export interface SqsEnvironment {
  endpoint: string;
  region: string;
  /** ElasticMQ accepts any credentials; these are placeholders, never real secrets. */
  accessKeyId: string;
  secretAccessKey: string;
  queues: QueueUrls;
}

export interface LocalCluster {
  /** Admin kubeconfig file (client certificate in system:masters). */
  kubeconfigPath: string;
  kubeConfig: KubeConfig;
  /** https://127.0.0.1:<port> */
  server: string;
  /** kubectl built from the same pin: use it in tests, not whatever kubectl the machine has. */
  kubectl: string;
  /** The throwaway CA that signed the API server's serving certificate (and the admin's). */
  caPath: string;
  sqs: SqsEnvironment;
  /** Environment variables that point a process at this cluster and queue (as in `.crdfn/env`). */
  env: Record<string, string>;
  /** Stop and start pieces, for outage tests. Queue contents and cluster state survive. */
  queue: ServerControl;
  apiServer: ServerControl;
  /** Stops everything and removes every temporary file. Idempotent. */
  stop(): Promise<void>;
}

/** A server of the environment, for outage tests. */
export interface ServerControl {
  /** stop(0) is a SIGKILL. */
  stop(graceMs?: number): Promise<void>;
  start(): Promise<void>;
  /** SIGSTOP: it keeps its port and accepts connections but answers nothing (a hung server). */
  pause(): void;
  /** SIGCONT after pause(). */
  resume(): void;
}

/**
 * Where ElasticMQ keeps its messages: "disk" (an H2 file: stopping or killing it loses nothing,
 * as SQS would), or "memory" (lost when it stops; a benchmark's stand-in for SQS, whose
 * durability costs no machine of yours: the H2 writes are about 60 % of ElasticMQ's CPU per
 * message in a steady stream, `npm run bench:queuedepth -- --steady`).
 */
export type QueueStorage = "disk" | "memory";

export interface StartOptions {
  /**
   * Keep the servers running (`crdfn dev`, `crdfn cluster up`): one that exits on its own is
   * started again on the same ports and data, with backoff on a crash loop (supervisor.ts), and
   * this is called with one line saying so. Tests leave it out: they stop servers on purpose.
   */
  supervise?: (line: string) => void;
  /** Start kube-controller-manager (garbage collection, namespace deletion). Default true. */
  controllerManager?: boolean;
  /** Start ElasticMQ (or use CRDFN_SQS_ENDPOINT). Default true. */
  queue?: boolean;
  /** Where ElasticMQ keeps messages. Default "disk". */
  queueStorage?: QueueStorage;
  /** Progress lines for people; tests pass a quiet logger. */
  log?: (line: string) => void;
  /** An OTLP gRPC collector (host:port) kube-apiserver exports its spans to (`crdfn dev --trace`). Default: untraced. */
  tracingEndpoint?: string;
  /** Environment to read settings from (KUBEBUILDER_ASSETS, CRDFN_BIN_DIR, CRDFN_SQS_ENDPOINT). Default process.env. */
  env?: NodeJS.ProcessEnv;
}
