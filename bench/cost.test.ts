import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { AWS_LIST_PRICES, breakEvenChangesPerSecond, costOfMillionChanges, podMonthlyCost } from "./cost.ts";

const close = (actual: number, expected: number, what: string) => assert.ok(Math.abs(actual - expected) < 1e-9, `${what}: ${actual} ≠ ${expected}`);

describe("what a change costs", () => {
  it("prices requests, invocations and GB-seconds, each invocation's time rounded up to the millisecond", () => {
    const c = costOfMillionChanges({ queueRequestsPerChange: 1.2, invocationsPerChange: 1, functionMsPerChange: 12.3, memoryMiB: 256, architecture: "arm64" });
    // 13 ms billed at 0.25 GB: 0.00325 GB-s a change, 3,250 GB-s a million.
    close(c.gbSecondsPerChange, 0.00325, "GB-s per change");
    close(c.sqs, 0.6, "SQS");
    close(c.lambdaRequests, 0.2, "Lambda requests");
    close(c.lambdaDuration, 3250 * 0.0000133334, "Lambda duration");
    close(c.total, 0.6 + 0.2 + 3250 * 0.0000133334, "total");
  });

  it("spreads the time over the invocations when a batch holds several changes", () => {
    const c = costOfMillionChanges({ queueRequestsPerChange: 0, invocationsPerChange: 0.5, functionMsPerChange: 10, memoryMiB: 1024, architecture: "x86_64" });
    // Two changes an invocation of 20 ms: 0.01 GB-s a change, and half an invocation.
    close(c.gbSecondsPerChange, 0.01, "GB-s per change");
    close(c.lambdaRequests, 0.1, "Lambda requests");
    close(c.lambdaDuration, 10_000 * AWS_LIST_PRICES.lambdaPerGbSecond.x86_64, "Lambda duration");
  });

  it("an always-on pod a month, and the change rate that costs the same", () => {
    const monthly = podMonthlyCost({ vcpu: 0.25, memoryGiB: 0.5, architecture: "x86_64" });
    close(monthly, (0.25 * 0.04048 + 0.5 * 0.004445) * 730, "pod a month");
    // $1 per million changes: the pod's dollars buy monthly × 1e6 changes over 730 hours.
    close(breakEvenChangesPerSecond(monthly, 1), (monthly * 1e6) / (730 * 3600), "break-even rate");
    assert.equal(breakEvenChangesPerSecond(monthly, 0), Number.POSITIVE_INFINITY);
  });
});
