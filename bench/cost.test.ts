import { describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  AWS_LIST_PRICES,
  GCP_LIST_PRICES,
  breakEvenChangesPerSecond,
  cloudRunBilledMs,
  costOfMillionChanges,
  costOfMillionChangesOnGcp,
  defaultFunctionCpu,
  podMonthlyCost,
  pubSubBilledBytes,
  quantityBytes,
} from "./cost.ts";

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

  it("bills a Pub/Sub request at least 1000 bytes, and a message its size with timestamp and id", () => {
    assert.equal(pubSubBilledBytes(200), 1000);
    // 2000 bytes of data, attributes and key, + 20 of timestamp + 16 of id.
    assert.equal(pubSubBilledBytes(2000), 2036);
  });

  it("rounds each push's time up to Cloud Run's 100 ms", () => {
    assert.equal(cloudRunBilledMs(1), 100);
    assert.equal(cloudRunBilledMs(100), 100);
    assert.equal(cloudRunBilledMs(100.5), 200);
  });

  it("reads the function's memory as a Kubernetes quantity and takes the CPU of its tier", () => {
    assert.equal(quantityBytes("256M"), 256e6);
    assert.equal(quantityBytes("256Mi"), 256 * 2 ** 20);
    assert.equal(quantityBytes("1Gi"), 2 ** 30);
    assert.throws(() => quantityBytes("256 MB"), /memory quantity "256 MB"/);
    // 256M is 244 MiB: the 256 MiB tier.
    assert.equal(defaultFunctionCpu(quantityBytes("256M")), 0.167);
    assert.equal(defaultFunctionCpu(quantityBytes("257Mi")), 0.333);
  });

  it("prices publishes and pushes by bytes, pushes as requests, and their billed time as vCPU- and GiB-seconds", () => {
    const c = costOfMillionChangesOnGcp({
      publishesPerChange: 1,
      pushesPerChange: 1.5,
      billedBytesPerRequest: 1000,
      billedMsPerChange: 200,
      vcpu: 0.167,
      memoryGiB: 0.25,
    });
    // 2.5 requests of 1000 bytes a change: 2.5e9 bytes a million changes.
    close(c.pubSub, (2.5e9 / 2 ** 40) * 40, "Pub/Sub");
    close(c.cloudRunRequests, 1.5 * 0.4, "Cloud Run requests");
    // 0.2 s a change: 200,000 s a million.
    close(c.cloudRunCpu, 200_000 * 0.167 * GCP_LIST_PRICES.cloudRunPerVcpuSecond, "vCPU-seconds");
    close(c.cloudRunMemory, 200_000 * 0.25 * GCP_LIST_PRICES.cloudRunPerGibSecond, "GiB-seconds");
    close(c.total, c.pubSub + c.cloudRunRequests + c.cloudRunCpu + c.cloudRunMemory, "total");
  });
});
