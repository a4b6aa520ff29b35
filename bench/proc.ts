// What the kernel and a Prometheus endpoint say about processes: memory, CPU time, machine load.
import { readFileSync } from "node:fs";

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

/** Machine-wide CPU ticks since boot, to tell how busy all cores were over an interval. */
export function machineTicks(): MachineTicks {
  const line = readFileSync("/proc/stat", "utf8").split("\n")[0] ?? "";
  const [user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0] = line.split(/\s+/).slice(1).map(Number);
  const busy = user + nice + system + irq + softirq + steal;
  return { busy, total: busy + idle + iowait };
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
