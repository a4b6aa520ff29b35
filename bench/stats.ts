// Summaries of measured samples: latency percentiles and distributions of counts.

export interface LatencySummary {
  samples: number;
  p50Ms: number;
  p95Ms: number;
  p99Ms: number;
  maxMs: number;
  meanMs: number;
}

/** Nearest-rank percentile (p in 0..100) of ascending-sorted values; NaN when there are none. */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1] ?? Number.NaN;
}

const round = (x: number): number => Math.round(x * 10) / 10;

export function summarizeLatency(samplesMs: readonly number[]): LatencySummary {
  const sorted = [...samplesMs].sort((a, b) => a - b);
  const sum = sorted.reduce((s, x) => s + x, 0);
  return {
    samples: sorted.length,
    p50Ms: round(percentile(sorted, 50)),
    p95Ms: round(percentile(sorted, 95)),
    p99Ms: round(percentile(sorted, 99)),
    maxMs: round(sorted.at(-1) ?? Number.NaN),
    meanMs: round(sorted.length ? sum / sorted.length : Number.NaN),
  };
}

export interface CountSummary {
  count: number;
  mean: number;
  min: number;
  max: number;
  /** How many times each value occurred, e.g. {"3": 998, "5": 2}. */
  histogram: Record<string, number>;
}

export function summarizeCounts(values: readonly number[]): CountSummary {
  const histogram: Record<string, number> = {};
  for (const v of values) histogram[String(v)] = (histogram[String(v)] ?? 0) + 1;
  return {
    count: values.length,
    mean: values.length ? Math.round((values.reduce((s, x) => s + x, 0) / values.length) * 100) / 100 : Number.NaN,
    min: values.length ? Math.min(...values) : Number.NaN,
    max: values.length ? Math.max(...values) : Number.NaN,
    histogram,
  };
}
