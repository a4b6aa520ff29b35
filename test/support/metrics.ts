// Reading Prometheus metrics in tests: from a registry in-process, or scraped from a bridge.
import type { Registry } from "prom-client";

/** Reads one sample of a counter or gauge from a Prometheus registry. */
export async function metricValue(registry: Registry, name: string, labels: Record<string, string> = {}): Promise<number> {
  const metric = await registry.getSingleMetric(name)?.get();
  return (metric?.values ?? [])
    .filter((v) => Object.entries(labels).every(([k, val]) => (v.labels as Record<string, unknown>)[k] === val))
    .reduce((n, v) => n + v.value, 0);
}

/** Scrapes a bridge's /metrics: each metric name → the sum of its samples. */
export async function scrapeMetrics(port: number): Promise<Map<string, number>> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const out = new Map<string, number>();
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const name = line.split(/[{ ]/)[0] ?? "";
    out.set(name, (out.get(name) ?? 0) + Number(line.split(" ").at(-1)));
  }
  return out;
}
