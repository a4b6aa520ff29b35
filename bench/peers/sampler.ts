// CPU seconds and peak RSS of named processes from /proc, the driver's own CPU, the machine's
// busy share, and the API server's request counters, between marks: one run's costs.
import type { KubeConfig } from "@kubernetes/client-node";
import { busyPercent, cpuSeconds, machineTicks, rssBytes, type MachineTicks } from "../proc.ts";
import { parseRequestCounts, parseRequestSeconds, requestDelta, scrapeMetrics, type RequestCounts } from "./api-requests.ts";

export interface Mark {
  wall: number;
  cpu: Record<string, number>;
  driver: NodeJS.CpuUsage;
  machine: MachineTicks;
  requests: RequestCounts;
  serverSeconds: RequestCounts;
}

export interface Usage {
  seconds: number;
  /** CPU seconds per process, and `driver` (this process: the load and the status watch). */
  cpuSeconds: Record<string, number>;
  machineBusyPercent: number;
  requests: RequestCounts;
  /** Seconds the API server spent on those requests, by the same keys. */
  serverSeconds: RequestCounts;
}

const r3 = (x: number): number => Math.round(x * 1000) / 1000;

export class Sampler {
  readonly #pids: Record<string, number>;
  readonly #kubeConfig: KubeConfig;
  readonly #peakRss: Record<string, number> = {};
  #timer: NodeJS.Timeout | undefined;

  constructor(pids: Record<string, number>, kubeConfig: KubeConfig) {
    this.#pids = pids;
    this.#kubeConfig = kubeConfig;
  }

  start(): void {
    this.#sample();
    this.#timer = setInterval(() => this.#sample(), 250);
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#sample();
  }

  #sample(): void {
    for (const [name, pid] of Object.entries(this.#pids)) {
      const rss = rssBytes(pid);
      if (rss !== undefined) this.#peakRss[name] = Math.max(this.#peakRss[name] ?? 0, rss);
    }
  }

  /** Highest RSS sampled (every 250 ms) per process, in MiB. */
  peakRssMiB(): Record<string, number> {
    return Object.fromEntries(Object.entries(this.#peakRss).map(([k, v]) => [k, Math.round((v / 1048576) * 10) / 10]));
  }

  async mark(): Promise<Mark> {
    const metrics = await scrapeMetrics(this.#kubeConfig);
    return {
      wall: performance.now(),
      cpu: Object.fromEntries(Object.entries(this.#pids).map(([name, pid]) => [name, cpuSeconds(pid) ?? 0])),
      driver: process.cpuUsage(),
      machine: machineTicks(),
      requests: parseRequestCounts(metrics),
      serverSeconds: parseRequestSeconds(metrics),
    };
  }

  async since(start: Mark): Promise<Usage> {
    const end = await this.mark();
    const cpu: Record<string, number> = {};
    for (const [name, used] of Object.entries(end.cpu)) cpu[name] = r3(used - (start.cpu[name] ?? 0));
    const driver = process.cpuUsage(start.driver);
    cpu.driver = r3((driver.user + driver.system) / 1e6);
    return {
      seconds: r3((end.wall - start.wall) / 1000),
      cpuSeconds: cpu,
      machineBusyPercent: busyPercent(start.machine, end.machine),
      requests: requestDelta(start.requests, end.requests),
      serverSeconds: requestDelta(start.serverSeconds, end.serverSeconds),
    };
  }
}
