// The runtime's measurements on Lambda: CloudWatch Embedded Metric Format through Powertools
// metrics, under the same names and dimensions as the Prometheus ones (metrics.ts). Nothing to
// scrape and no API call: the JSON lines on stdout become metrics in CloudWatch.
import { Metrics, MetricUnit } from "@aws-lambda-powertools/metrics";
import { METRIC, resultOf, type RuntimeMetrics } from "./metrics.ts";

export interface EmfMetrics {
  /** The measurements of one cluster's runtimes (dimension `cluster`). */
  forCluster(cluster: string): RuntimeMetrics;
  /** Writes what was measured since the last flush; the Lambda adapter calls it once per invocation. */
  flush(): void;
}

export interface EmfOptions {
  namespace: string;
  /** Powertools' `service` dimension: the function's name. */
  serviceName: string;
  clock: () => Date;
}

/**
 * One EMF document holds one set of dimension values, so each set ({cluster, controller} and
 * {cluster, controller, result}) has its own Powertools store; a flush writes one line per set
 * that measured something. Repeated values of a metric stay one array (CloudWatch's statistics
 * and percentiles are computed from them), so reconcile_time_seconds is a distribution, as the
 * Prometheus histogram is.
 */
export function createEmfMetrics(opts: EmfOptions): EmfMetrics {
  const stores = new Map<string, Metrics>();
  const store = (dimensions: Record<string, string>): Metrics => {
    const key = JSON.stringify(dimensions);
    let metrics = stores.get(key);
    if (!metrics) {
      metrics = new Metrics({ namespace: opts.namespace, serviceName: opts.serviceName, defaultDimensions: dimensions });
      stores.set(key, metrics);
    }
    return metrics;
  };
  return {
    forCluster(cluster) {
      return {
        observe(m) {
          const r = resultOf(m.outcome);
          const perController = store({ cluster, controller: m.controller });
          store({ cluster, controller: m.controller, result: r.result }).addMetric(METRIC.reconcileTotal, MetricUnit.Count, 1);
          if (r.error) perController.addMetric(METRIC.reconcileErrors, MetricUnit.Count, 1);
          if (r.terminal) perController.addMetric(METRIC.terminalErrors, MetricUnit.Count, 1);
          if (m.outcome.result === "success" && m.outcome.earlierIncarnation) perController.addMetric(METRIC.earlierIncarnation, MetricUnit.Count, 1);
          perController.addMetric(METRIC.reconcileTime, MetricUnit.Seconds, m.seconds);
          perController.addMetric(METRIC.apiCalls, MetricUnit.Count, m.apiCalls);
          if (m.lagSeconds !== undefined) perController.addMetric(METRIC.eventLag, MetricUnit.Seconds, m.lagSeconds);
        },
      };
    },
    flush() {
      const now = opts.clock();
      for (const metrics of stores.values()) {
        if (!metrics.hasStoredMetrics()) continue;
        metrics.setTimestamp(now);
        metrics.publishStoredMetrics();
      }
    },
  };
}
