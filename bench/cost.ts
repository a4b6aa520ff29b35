// What a change costs on AWS (SQS + Lambda) and on GCP (Pub/Sub + Cloud Run functions): the
// benchmark's measured queue requests, bytes and function time per change, priced at the
// providers' list prices, and the change rate at which that spend equals one always-on
// controller pod. Pure arithmetic, so docs/performance.md's tables can be checked against it; the
// prices are dated because they change.

/** AWS list prices, us-east-1, on-demand, free tiers left out (they are per account, not per change). */
export interface AwsPrices {
  /** When they were read, and where. */
  asOf: string;
  source: string;
  /** SQS FIFO: per million requests, each 64 KiB chunk of a request's payload one request. */
  sqsFifoPerMillionRequests: number;
  /** Lambda: per million invocations. */
  lambdaPerMillionRequests: number;
  /** Lambda duration per GB-second, by architecture (billed in 1 ms steps). */
  lambdaPerGbSecond: { arm64: number; x86_64: number };
  /** Fargate (EKS or ECS), Linux: per vCPU-hour and per GB-hour. */
  fargatePerVcpuHour: { arm64: number; x86_64: number };
  fargatePerGbHour: { arm64: number; x86_64: number };
}

export const AWS_LIST_PRICES: AwsPrices = {
  asOf: "2026-11-25",
  source:
    "AWS's SQS, Lambda and Fargate list prices for us-east-1 as quoted by pricing guides dated 2026-03 to 2026-06 " +
    "(cloudburn.io, factualminds.com, vantage.sh, wring.co); AWS's own pricing pages were not in the search index used",
  sqsFifoPerMillionRequests: 0.5,
  lambdaPerMillionRequests: 0.2,
  lambdaPerGbSecond: { arm64: 0.0000133334, x86_64: 0.0000166667 },
  fargatePerVcpuHour: { arm64: 0.03238, x86_64: 0.04048 },
  fargatePerGbHour: { arm64: 0.00356, x86_64: 0.004445 },
};

export type Architecture = "arm64" | "x86_64";

/** What one change uses, measured (requests, function time) or deployed (memory, architecture). */
export interface ChangeUsage {
  /** Every SQS request per change: the bridge's sends, the consumer's receives and deletes, visibility changes. */
  queueRequestsPerChange: number;
  /** Function invocations per change (1 when every batch holds one message: the upper bound). */
  invocationsPerChange: number;
  /** Time inside the function per change (ms). */
  functionMsPerChange: number;
  memoryMiB: number;
  architecture: Architecture;
}

export interface MillionChanges {
  sqs: number;
  lambdaRequests: number;
  lambdaDuration: number;
  total: number;
  gbSecondsPerChange: number;
}

const MILLION = 1_000_000;
const HOURS_PER_MONTH = 730;
const SECONDS_PER_MONTH = HOURS_PER_MONTH * 3600;

/**
 * The cost of a million changes in dollars. Lambda bills each invocation's duration rounded up
 * to the millisecond, so the time per invocation is rounded up before it is priced.
 */
export function costOfMillionChanges(u: ChangeUsage, prices: AwsPrices = AWS_LIST_PRICES): MillionChanges {
  const msPerInvocation = u.invocationsPerChange > 0 ? Math.ceil(u.functionMsPerChange / u.invocationsPerChange) : 0;
  const gbSecondsPerChange = (u.memoryMiB / 1024) * (msPerInvocation / 1000) * u.invocationsPerChange;
  const sqs = u.queueRequestsPerChange * prices.sqsFifoPerMillionRequests;
  const lambdaRequests = u.invocationsPerChange * prices.lambdaPerMillionRequests;
  const lambdaDuration = gbSecondsPerChange * MILLION * prices.lambdaPerGbSecond[u.architecture];
  return { sqs, lambdaRequests, lambdaDuration, total: sqs + lambdaRequests + lambdaDuration, gbSecondsPerChange };
}

/** An always-on pod's size, as it is billed on Fargate (which rounds up to its own sizes: 0.25 vCPU takes 0.5 GB at least). */
export interface PodSize {
  vcpu: number;
  memoryGiB: number;
  architecture: Architecture;
}

/** Dollars a month (730 hours) for one pod running all the time. */
export function podMonthlyCost(pod: PodSize, prices: AwsPrices = AWS_LIST_PRICES): number {
  return (pod.vcpu * prices.fargatePerVcpuHour[pod.architecture] + pod.memoryGiB * prices.fargatePerGbHour[pod.architecture]) * HOURS_PER_MONTH;
}

/** The steady change rate (per second) at which a month of changes costs what `monthly` dollars buy. */
export function breakEvenChangesPerSecond(monthly: number, perMillionChanges: number): number {
  return perMillionChanges > 0 ? ((monthly / perMillionChanges) * MILLION) / SECONDS_PER_MONTH : Number.POSITIVE_INFINITY;
}

/** GCP list prices, Tier 1 regions (us-central1 and the like), on demand, free tiers left out. */
export interface GcpPrices {
  asOf: string;
  source: string;
  /** Pub/Sub throughput: publish requests and push, pull or streaming-pull deliveries, per TiB (2⁴⁰ bytes). */
  pubSubPerTiB: number;
  /** Each publish, push or pull request is billed at least this many bytes, whatever its messages' size. */
  pubSubMinimumBytesPerRequest: number;
  /** A message's billed size adds, to its data, attributes and ordering key, 20 bytes of timestamp and its id's length. */
  pubSubTimestampBytes: number;
  /** Not a price: the id's length assumed (Pub/Sub's ids are decimal strings, 16 digits in its docs' push examples; the emulator's are shorter). */
  pubSubMessageIdBytes: number;
  /** Cloud Run (services, and Cloud Run functions, which are billed as services), request-based billing. */
  cloudRunPerMillionRequests: number;
  cloudRunPerVcpuSecond: number;
  cloudRunPerGibSecond: number;
  /** Billed time is rounded up to this step. */
  cloudRunBillingStepMs: number;
}

export const GCP_LIST_PRICES: GcpPrices = {
  asOf: "2026-11-25",
  source:
    "cloud.google.com/pubsub/pricing ($40 per TiB of throughput, 1000 bytes at least per publish, push or pull request; a message's size: data, " +
    "attributes, 20 bytes of timestamp, its id) and cloud.google.com/run/pricing (rounded up to the nearest 100 ms; Tier 1, CPU allocated only " +
    "during requests: $0.000024 per vCPU-second), with $0.0000025 per GiB-second and $0.40 per million requests as quoted by cloudchipr.com " +
    "(2025) and cloudwebschool.com; pages as stored in the search index read on 2026-11-25, not dated themselves",
  pubSubPerTiB: 40,
  pubSubMinimumBytesPerRequest: 1000,
  pubSubTimestampBytes: 20,
  pubSubMessageIdBytes: 16,
  cloudRunPerMillionRequests: 0.4,
  cloudRunPerVcpuSecond: 0.000024,
  cloudRunPerGibSecond: 0.0000025,
  cloudRunBillingStepMs: 100,
};

/**
 * A Cloud Run function's CPU when only its memory is set: Cloud Run functions' memory-to-vCPU
 * tiers (cloud.google.com/functions/docs/configuring/memory, read 2026-11-25), MiB → vCPU. A memory
 * between two tiers is taken at the tier above it (an assumption: the docs list tiers only).
 */
const CLOUD_RUN_FUNCTION_CPU_TIERS: ReadonlyArray<readonly [number, number]> = [
  [128, 0.083],
  [256, 0.167],
  [512, 0.333],
  [1024, 0.583],
  [2048, 1],
  [4096, 2],
  [8192, 2],
  [16384, 4],
  [32768, 8],
];

const QUANTITY_UNITS: Record<string, number> = { "": 1, k: 1e3, M: 1e6, G: 1e9, Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30 };

/** Bytes of a memory quantity as the Cloud Functions v2 API reads `available_memory` ("256M" is 256 × 10⁶ bytes, a Kubernetes quantity). */
export function quantityBytes(quantity: string): number {
  const m = /^(\d+(?:\.\d+)?)(k|M|G|Ki|Mi|Gi)?$/.exec(quantity);
  if (!m) throw new Error(`memory quantity "${quantity}": expected a number with k, M, G, Ki, Mi or Gi`);
  return Number(m[1]) * (QUANTITY_UNITS[m[2] ?? ""] ?? 1);
}

/** The vCPU Cloud Run gives a function whose memory alone is set. */
export function defaultFunctionCpu(memoryBytes: number): number {
  const mib = memoryBytes / 2 ** 20;
  const tier = CLOUD_RUN_FUNCTION_CPU_TIERS.find(([limit]) => mib <= limit);
  if (!tier) throw new Error(`a Cloud Run function has at most 32 GiB of memory, not ${mib} MiB`);
  return tier[1];
}

/** One push's billed time: its wall time rounded up to Cloud Run's step (each push its own instance's request: concurrency 1). */
export function cloudRunBilledMs(ms: number, prices: GcpPrices = GCP_LIST_PRICES): number {
  return Math.ceil(ms / prices.cloudRunBillingStepMs) * prices.cloudRunBillingStepMs;
}

/** One request of one message: its billed bytes (its size with timestamp and id, at least the minimum per request). */
export function pubSubBilledBytes(messageBytes: number, prices: GcpPrices = GCP_LIST_PRICES): number {
  return Math.max(prices.pubSubMinimumBytesPerRequest, messageBytes + prices.pubSubTimestampBytes + prices.pubSubMessageIdBytes);
}

/** What one change uses on the Cloud Run path, measured (requests, bytes, time) or deployed (memory, CPU). */
export interface CloudRunUsage {
  /** Publish requests per change: one a message, since a request holds one ordering key and a batch never holds an object twice. */
  publishesPerChange: number;
  /** Push requests per change: first deliveries and redeliveries, each one message. */
  pushesPerChange: number;
  /** Mean billed bytes of one request (pubSubBilledBytes of each push). */
  billedBytesPerRequest: number;
  /** The pushes' billed time per change: each push's wall time rounded up (cloudRunBilledMs), summed. */
  billedMsPerChange: number;
  vcpu: number;
  memoryGiB: number;
}

export interface CloudRunMillionChanges {
  pubSub: number;
  cloudRunRequests: number;
  cloudRunCpu: number;
  cloudRunMemory: number;
  total: number;
}

/** The cost of a million changes in dollars on Pub/Sub and Cloud Run functions. */
export function costOfMillionChangesOnGcp(u: CloudRunUsage, prices: GcpPrices = GCP_LIST_PRICES): CloudRunMillionChanges {
  const bytes = (u.publishesPerChange + u.pushesPerChange) * u.billedBytesPerRequest * MILLION;
  const pubSub = (bytes / 2 ** 40) * prices.pubSubPerTiB;
  const cloudRunRequests = u.pushesPerChange * prices.cloudRunPerMillionRequests;
  const seconds = (u.billedMsPerChange / 1000) * MILLION;
  const cloudRunCpu = seconds * u.vcpu * prices.cloudRunPerVcpuSecond;
  const cloudRunMemory = seconds * u.memoryGiB * prices.cloudRunPerGibSecond;
  return { pubSub, cloudRunRequests, cloudRunCpu, cloudRunMemory, total: pubSub + cloudRunRequests + cloudRunCpu + cloudRunMemory };
}
