// What a change costs on AWS: the benchmark's measured queue requests and function time per
// change, priced at AWS's list prices, and the change rate at which that spend equals one
// always-on controller pod. Pure arithmetic, so docs/performance.md's table can be checked
// against it; the prices are dated because they change.

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
