// What a change costs on the Cloud Run target: the rated phase's Pub/Sub requests, bytes and push
// time per change, priced at GCP's list prices (cost.ts) for the function as deploy/gcp.ts
// deploys it, and set against the same always-on pod as the AWS side.
import { FUNCTION_MEMORY } from "../deploy/gcp.ts";
import { GCP_LIST_PRICES, costOfMillionChangesOnGcp, defaultFunctionCpu, quantityBytes, type CloudRunMillionChanges, type CloudRunUsage } from "./cost.ts";
import type { BenchResult } from "./pipeline.ts";
import { againstThePod, formatPodLine, type AgainstThePod } from "./report.ts";

export interface CloudRunChangeCost extends AgainstThePod {
  /** Measured in the rated phase, per spec change written; the function's size as deployed. */
  usage: CloudRunUsage & { memory: string; wallMsPerChange: number };
  perMillionChanges: CloudRunMillionChanges;
  prices: { asOf: string; source: string };
}

/**
 * The rated phase's cost per change on Pub/Sub and Cloud Run functions. Every push is priced as
 * its own billed instance time, rounded up (the deployed function takes one request at a time):
 * an upper bound, since Cloud Run rounds an instance's busy time, and back-to-back requests on one
 * instance would share a step.
 */
export function cloudRunChangeCost(r: BenchResult): CloudRunChangeCost {
  const pushes = r.rated.pushes;
  if (!pushes) throw new Error("the rated phase has no push requests: was it run with --target cloudrun?");
  const changes = Math.max(1, r.rated.writes);
  const memoryBytes = quantityBytes(FUNCTION_MEMORY);
  const usage = {
    publishesPerChange: pushes.bridge.messages / changes,
    pushesPerChange: pushes.requests / changes,
    billedBytesPerRequest: pushes.requests > 0 ? pushes.billedBytes / pushes.requests : 0,
    billedMsPerChange: pushes.billedMs / changes,
    vcpu: defaultFunctionCpu(memoryBytes),
    memoryGiB: memoryBytes / 2 ** 30,
    memory: FUNCTION_MEMORY,
    wallMsPerChange: (pushes.requestLatency.meanMs * pushes.requests) / changes,
  };
  const perMillionChanges = costOfMillionChangesOnGcp(usage);
  return { usage, perMillionChanges, ...againstThePod(perMillionChanges.total), prices: { asOf: GCP_LIST_PRICES.asOf, source: GCP_LIST_PRICES.source } };
}

/** The cost lines under the report's table. */
export function formatCloudRunCost(c: CloudRunChangeCost): string {
  const u = c.usage;
  const m = c.perMillionChanges;
  const $ = (x: number) => `$${x.toFixed(2)}`;
  return [
    `What a change costs on GCP (rated phase; list prices of ${c.prices.asOf}, Tier 1 region, free tiers left out; prices change):`,
    `  per change: ${u.publishesPerChange.toFixed(2)} Pub/Sub publishes + ${u.pushesPerChange.toFixed(2)} pushes of ${Math.round(u.billedBytesPerRequest)} billed bytes each; ` +
      `${u.wallMsPerChange.toFixed(1)} ms of push requests, billed ${u.billedMsPerChange.toFixed(0)} ms (each rounded up to 100 ms) at ${u.vcpu} vCPU / ${u.memory}`,
    `  per million changes: Pub/Sub ${$(m.pubSub)} + Cloud Run requests ${$(m.cloudRunRequests)} + vCPU-s ${$(m.cloudRunCpu)} + GiB-s ${$(m.cloudRunMemory)} = ${$(m.total)}`,
    formatPodLine(c, ", as on the AWS side"),
  ].join("\n");
}
