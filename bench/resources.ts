// Samples the bridge process (RSS from /proc, heap from its /metrics) while the benchmark runs,
// and CPU use per phase of each part — the bridge, the API server, etcd, ElasticMQ and this
// process (poller, functions, load) — and of the whole machine: where the time goes.
import { BRIDGE_METRICS, busyPercent, cpuSeconds, machineTicks, metricValues, rssBytes, type MachineTicks } from "./proc.ts";

const RSS = "process_resident_memory_bytes";
const HEAP = "nodejs_heap_size_used_bytes";
const { publishDelaySum: PUBLISH_SUM, publishDelayCount: PUBLISH_COUNT, sendRequests: SENDS } = BRIDGE_METRICS;

export interface BridgeMemory {
  pid: number;
  /** Highest VmRSS sampled (every 250 ms). */
  maxRssBytes: number;
  /** Highest values the bridge reported on /metrics (sampled every 2 s). */
  maxMetricRssBytes: number | null;
  maxHeapUsedBytes: number | null;
}

export interface PhaseCpu {
  /**
   * Percent of one core per process: bridge, apiServer, etcd, elasticMq, and bench (this
   * process: poller, reconcile functions, load generator and status watch).
   */
  percentOfOneCore: Record<string, number>;
  /** All cores, everything on the machine (API server, etcd, ElasticMQ, other users). */
  machineBusyPercent: number;
  /** Mean time from the bridge observing a change to the queue accepting its event. */
  bridgePublishDelayMs: number | null;
  /** Key events the queue accepted from the bridge in the phase (its publish delay's count). */
  bridgeMessages: number;
  /** Requests to the queue in the phase: the bridge's sends, and the poller's and functions' by command. */
  queueRequests: Record<string, number>;
}

/** Where a phase's CPU and counts start from. */
export interface Mark {
  wall: number;
  processes: Record<string, number>;
  bench: NodeJS.CpuUsage;
  machine: MachineTicks;
  publish: { sum: number; count: number } | undefined;
  queueRequests: Record<string, number>;
}

export class ResourceSampler {
  readonly #pid: number;
  readonly #metricsUrl: string;
  readonly #others: Record<string, number>;
  readonly #queueRequests: () => Record<string, number>;
  readonly #sendsName: string;
  #maxRss = 0;
  #maxMetricRss: number | null = null;
  #maxHeap: number | null = null;
  #lastMetrics: Record<string, number> = {};
  readonly #timers: NodeJS.Timeout[] = [];

  /**
   * `others`: more processes whose CPU use to report per phase, by name; `queueRequests`: this
   * process's requests to the queue so far; `sendsName`: what the bridge's send counter is called
   * among them (a SendMessageBatch on SQS, a publish call on Pub/Sub).
   */
  constructor(
    pid: number,
    metricsUrl: string,
    others: Record<string, number>,
    queueRequests: () => Record<string, number> = () => ({}),
    sendsName = "bridge SendMessageBatch",
  ) {
    this.#pid = pid;
    this.#metricsUrl = metricsUrl;
    this.#others = others;
    this.#queueRequests = queueRequests;
    this.#sendsName = sendsName;
  }

  start(): void {
    this.#sampleRss();
    this.#timers.push(
      setInterval(() => this.#sampleRss(), 250),
      setInterval(() => void this.scrape(), 2000),
    );
  }

  stop(): void {
    for (const t of this.#timers) clearInterval(t);
  }

  #sampleRss(): void {
    this.#maxRss = Math.max(this.#maxRss, rssBytes(this.#pid) ?? 0);
  }

  async scrape(): Promise<void> {
    try {
      const text = await (await fetch(this.#metricsUrl)).text();
      this.#lastMetrics = metricValues(text, [RSS, HEAP, PUBLISH_SUM, PUBLISH_COUNT, SENDS]);
      const rss = this.#lastMetrics[RSS];
      const heap = this.#lastMetrics[HEAP];
      if (rss !== undefined) this.#maxMetricRss = Math.max(this.#maxMetricRss ?? 0, rss);
      if (heap !== undefined) this.#maxHeap = Math.max(this.#maxHeap ?? 0, heap);
    } catch {
      // A missed scrape only lowers the sampling rate.
    }
  }

  memory(): BridgeMemory {
    this.#sampleRss();
    return { pid: this.#pid, maxRssBytes: this.#maxRss, maxMetricRssBytes: this.#maxMetricRss, maxHeapUsedBytes: this.#maxHeap };
  }

  async mark(): Promise<Mark> {
    await this.scrape();
    const sum = this.#lastMetrics[PUBLISH_SUM];
    const count = this.#lastMetrics[PUBLISH_COUNT];
    return {
      wall: performance.now(),
      processes: Object.fromEntries(Object.entries({ bridge: this.#pid, ...this.#others }).map(([name, pid]) => [name, cpuSeconds(pid) ?? 0])),
      bench: process.cpuUsage(),
      machine: machineTicks(),
      publish: sum === undefined || count === undefined ? undefined : { sum, count },
      queueRequests: { [this.#sendsName]: this.#lastMetrics[SENDS] ?? 0, ...this.#queueRequests() },
    };
  }

  /** CPU use between a mark and now. */
  async since(start: Mark): Promise<PhaseCpu> {
    const end = await this.mark();
    const seconds = (end.wall - start.wall) / 1000;
    const bench = process.cpuUsage(start.bench);
    const pct = (x: number) => Math.round((x / seconds) * 1000) / 10;
    const published = end.publish && start.publish ? end.publish.count - start.publish.count : 0;
    const percentOfOneCore: Record<string, number> = {};
    for (const [name, used] of Object.entries(end.processes)) percentOfOneCore[name] = pct(used - (start.processes[name] ?? 0));
    percentOfOneCore.bench = pct((bench.user + bench.system) / 1e6);
    const queueRequests = Object.fromEntries(Object.entries(end.queueRequests).map(([k, v]) => [k, v - (start.queueRequests[k] ?? 0)]));
    return {
      queueRequests,
      percentOfOneCore,
      machineBusyPercent: busyPercent(start.machine, end.machine),
      bridgeMessages: published,
      bridgePublishDelayMs: published > 0 && end.publish && start.publish ? Math.round(((end.publish.sum - start.publish.sum) / published) * 10000) / 10 : null,
    };
  }
}
