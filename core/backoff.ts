// How long to wait before the next try after `failures` failures in a row: exponential with a
// cap, and optional jitter so that many clients failing together do not retry together.
// Each caller keeps its own constants: a watch, a publish and a receive fail for different reasons.

export interface BackoffPolicy {
  /** The wait after the first failure. */
  initialMs: number;
  maxMs: number;
  /** The fraction (0–1) of the wait that may be taken off at random; 0.5 waits between half and all of it. Default 0. */
  jitter?: number;
}

/** `failures` ≥ 1. `random` returns [0, 1): Math.random, or a fixed value in tests. */
export function backoffMs(failures: number, policy: BackoffPolicy, random: () => number = Math.random): number {
  const exponential = Math.min(policy.maxMs, policy.initialMs * 2 ** Math.max(0, failures - 1));
  return exponential * (1 - (policy.jitter ?? 0) * random());
}
