// The Cloud Run target's push requests in a phase, summed as Pub/Sub bills them (bytes, at least
// a minimum per request) and as Cloud Run bills the function serving them (time, rounded up).
import type { PushRecord } from "../emulator/pubsub-push.ts";
import { cloudRunBilledMs, pubSubBilledBytes } from "./cost.ts";
import { summarizeLatency, type LatencySummary } from "./stats.ts";

export interface PushSummary {
  /** The bridge's publish calls (batches handed to the Pub/Sub client, which sends one request per ordering key in them) and messages published. */
  bridge: { publishCalls: number; messages: number };
  requests: number;
  /** First deliveries of a message, and deliveries after a refusal. */
  firstAttempts: number;
  redeliveries: number;
  /** Answered with an acknowledging status, and otherwise (refused, failed, timed out). */
  acked: number;
  refused: number;
  /** Wall time of each push request: the function's time per push, as Cloud Run would serve it. */
  requestLatency: LatencySummary;
  /** Each push's wall time rounded up to Cloud Run's billing step, summed. */
  billedMs: number;
  /** Mean size of a pushed message's data, attributes and ordering key, in bytes. */
  meanMessageBytes: number;
  /** Each push's billed bytes (its size with timestamp and id, at least Pub/Sub's minimum per request), summed. */
  billedBytes: number;
}

export function summarizePushes(pushes: readonly PushRecord[], bridge: PushSummary["bridge"]): PushSummary {
  const firstAttempts = pushes.filter((p) => p.attempt <= 1).length;
  const acked = pushes.filter((p) => p.acked).length;
  const sum = (f: (p: PushRecord) => number) => pushes.reduce((n, p) => n + f(p), 0);
  return {
    bridge,
    requests: pushes.length,
    firstAttempts,
    redeliveries: pushes.length - firstAttempts,
    acked,
    refused: pushes.length - acked,
    requestLatency: summarizeLatency(pushes.map((p) => p.ms)),
    billedMs: sum((p) => cloudRunBilledMs(p.ms)),
    meanMessageBytes: pushes.length ? Math.round(sum((p) => p.bytes) / pushes.length) : 0,
    billedBytes: sum((p) => pubSubBilledBytes(p.bytes)),
  };
}
