// What the kernel and a Prometheus endpoint say about processes: memory, CPU time, machine load.
import { execFileSync } from "node:child_process";
import { readFileSync, readdirSync } from "node:fs";
import { availableParallelism } from "node:os";
import { dirname } from "node:path";

/** Resident set size of a process in bytes (VmRSS), or undefined once it is gone. */
export function rssBytes(pid: number): number | undefined {
  try {
    const kb = /^VmRSS:\s+(\d+)\s+kB/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1];
    return kb === undefined ? undefined : Number(kb) * 1024;
  } catch {
    return undefined;
  }
}

// USER_HZ: 100 on every Linux the benchmark targets (it is fixed in the kernel ABI for /proc).
const TICKS_PER_SECOND = 100;

/** User + system CPU seconds a process has used, or undefined once it is gone. */
export function cpuSeconds(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // The command name (field 2) may hold spaces; fields after its closing parenthesis are fixed.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return (Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND;
  } catch {
    return undefined;
  }
}

export interface MachineTicks {
  busy: number;
  total: number;
}

function ticksOf(line: string): MachineTicks {
  const [user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0] = line.split(/\s+/).slice(1).map(Number);
  const busy = user + nice + system + irq + softirq + steal;
  return { busy, total: busy + idle + iowait };
}

/** Machine-wide CPU ticks since boot, to tell how busy all cores were over an interval. */
export function machineTicks(): MachineTicks {
  return ticksOf(readFileSync("/proc/stat", "utf8").split("\n")[0] ?? "");
}

/** Each core's CPU ticks since boot (cpu0, cpu1, …): which core of a `--split` run was the limit. */
export function coreTicks(): MachineTicks[] {
  return readFileSync("/proc/stat", "utf8")
    .split("\n")
    .filter((l) => /^cpu\d+ /.test(l))
    .map(ticksOf);
}

/** How busy, in percent to one decimal, between two readings of the same ticks. */
export const busyPercent = (before: MachineTicks, after: MachineTicks): number =>
  Math.round(((after.busy - before.busy) / Math.max(1, after.total - before.total)) * 1000) / 10;

/** The bridge's /metrics series the benchmarks read, named once for bench:peers and npm run bench alike. */
export const BRIDGE_METRICS = {
  publishDelaySum: "crdfn_bridge_publish_delay_seconds_sum",
  publishDelayCount: "crdfn_bridge_publish_delay_seconds_count",
  sendRequests: "crdfn_bridge_send_requests_total",
  published: "crdfn_bridge_events_published_total",
  pending: "crdfn_bridge_pending_events",
} as const;

/** A metric's value summed over all its label sets (a counter by type), in a Prometheus text exposition. */
export function metricSum(text: string, name: string): number {
  let sum = 0;
  for (const line of text.split("\n")) {
    if (line.startsWith(`${name} `) || line.startsWith(`${name}{`)) sum += Number(line.slice(line.lastIndexOf(" ") + 1)) || 0;
  }
  return sum;
}

/** Values of the named, unlabelled metrics in a Prometheus text exposition. */
export function metricValues(text: string, names: readonly string[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const line of text.split("\n")) {
    const [name, value] = line.split(" ");
    if (name !== undefined && value !== undefined && names.includes(name)) out[name] = Number(value);
  }
  return out;
}

function commandLine(pid: string): string[] {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
  } catch {
    return [];
  }
}

export interface ClusterPids {
  apiServer?: number;
  etcd?: number;
  elasticMq?: number;
  controllerManager?: number;
}

/**
 * The emulator's server processes behind the API server on `apiPort`, found by their command
 * lines: the API server names its etcd, and etcd's data folder sits next to ElasticMQ's config.
 */
export function clusterPids(apiPort: number): ClusterPids {
  const all = readdirSync("/proc")
    .filter((d) => /^\d+$/.test(d))
    .map((pid) => ({ pid: Number(pid), args: commandLine(pid) }));
  const found: ClusterPids = {};
  const api = all.find((p) => (p.args[0] ?? "").endsWith("kube-apiserver") && p.args.includes(`--secure-port=${apiPort}`));
  if (api === undefined) return found;
  found.apiServer = api.pid;
  const etcdUrl = api.args.find((a) => a.startsWith("--etcd-servers="))?.split("=")[1];
  const etcd = all.find((p) => (p.args[0] ?? "").endsWith("etcd") && p.args.includes(`--listen-client-urls=${etcdUrl}`));
  if (etcd === undefined) return found;
  found.etcd = etcd.pid;
  const dataDir = etcd.args.find((a) => a.startsWith("--data-dir="))?.slice("--data-dir=".length);
  if (dataDir === undefined) return found;
  const conf = `-Dconfig.file=${dirname(dataDir)}/elasticmq/elasticmq.conf`;
  const mq = all.find((p) => p.args.includes(conf));
  if (mq !== undefined) found.elasticMq = mq.pid;
  const kubeconfig = `--kubeconfig=${dirname(dataDir)}/kubeconfig`;
  const cm = all.find((p) => (p.args[0] ?? "").endsWith("kube-controller-manager") && p.args.includes(kubeconfig));
  if (cm !== undefined) found.controllerManager = cm.pid;
  return found;
}

/** The Pub/Sub emulator (infra/pubsub/main.go) serving `host` (host:port), found by its -addr flag. */
export function pubSubEmulatorPid(host: string): number | undefined {
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    const args = commandLine(d);
    const i = args.indexOf("-addr");
    if (i >= 0 && args[i + 1] === host) return Number(d);
  }
  return undefined;
}

/** The ElasticMQ process listening on `port`, found by the config file its command line names. */
export function elasticMqPid(port: number): number | undefined {
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    const conf = commandLine(d)
      .find((a) => a.startsWith("-Dconfig.file="))
      ?.slice("-Dconfig.file=".length);
    try {
      if (conf !== undefined && readFileSync(conf, "utf8").includes(`bind-port = ${port},`)) return Number(d);
    } catch {
      // Gone, or not ours to read.
    }
  }
  return undefined;
}

/**
 * Binds a process and all its threads to the given CPUs (`taskset -a -p`); the processes it
 * spawns afterwards inherit the binding. Linux only, as the rest of this file.
 */
export function pinToCpus(pid: number, cpuList: string): void {
  execFileSync("taskset", ["-a", "-p", "-c", cpuList, String(pid)], { stdio: "ignore" });
}

// --split: what a cluster's nodes run (etcd, kube-apiserver, kube-controller-manager, the bridge
// or the operators) on CPU 0, what runs elsewhere in production (SQS, Lambda; the bench's
// driver) on CPU 1, so every system gets the same one core for its cluster side.
const CLUSTER_CPU = "0";
const OFF_CLUSTER_CPU = "1";

/** Why --split cannot run here (checked before the cluster starts, not found by taskset minutes in), or undefined. */
export function splitRefusal(): string | undefined {
  const n = availableParallelism();
  return n < 2 ? `--split needs 2 CPUs to put the cluster side on one of them; this process may use ${n}` : undefined;
}

/** Before a system starts: the control plane on the cluster's CPU, ElasticMQ off it, and this process on it, so what it spawns inherits the binding. */
export function splitBeforeStart(control: ClusterPids): void {
  for (const pid of [control.apiServer, control.etcd, control.controllerManager]) if (pid !== undefined) pinToCpus(pid, CLUSTER_CPU);
  if (control.elasticMq !== undefined) pinToCpus(control.elasticMq, OFF_CLUSTER_CPU);
  pinToCpus(process.pid, CLUSTER_CPU);
}

/** Once it runs: its off-cluster processes (the poller and functions) and this driver move off the cluster's CPU. */
export function splitAfterStart(offCluster: Iterable<number>): void {
  for (const pid of [...offCluster, process.pid]) pinToCpus(pid, OFF_CLUSTER_CPU);
}
