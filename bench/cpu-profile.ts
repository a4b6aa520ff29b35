// Where a `node --cpu-prof` profile spent its time: self time by function and by package.
//   node bench/cpu-profile.ts <file.cpuprofile> [top=20]
import { readFileSync } from "node:fs";

export interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}

export interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

export interface Share {
  name: string;
  ms: number;
  percent: number;
}

/** Which part of the program a script URL belongs to: a package, a repository folder, or Node itself. */
export function areaOf(url: string): string {
  if (url === "") return "(native/idle/gc)";
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url)?.[1];
  if (pkg !== undefined) return pkg;
  if (url.startsWith("node:")) return "node internals";
  const folder = /\/work\/[^/]+\/([^/]+)\//.exec(url)?.[1] ?? /file:\/\/.*?\/(core|bridge|functions|emulator|cli|bench|test)\//.exec(url)?.[1];
  return folder ?? url;
}

/** Self time per key, largest first. */
export function selfTime(profile: CpuProfile, keyOf: (n: ProfileNode) => string): Share[] {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const totals = new Map<string, number>();
  let all = 0;
  profile.samples.forEach((id, i) => {
    const node = byId.get(id);
    const us = profile.timeDeltas[i] ?? 0;
    if (!node) return;
    all += us;
    const key = keyOf(node);
    totals.set(key, (totals.get(key) ?? 0) + us);
  });
  return [...totals.entries()]
    .map(([name, us]) => ({ name, ms: Math.round(us / 1000), percent: Math.round((us / all) * 1000) / 10 }))
    .sort((a, b) => b.ms - a.ms);
}

/** A function as `name package/path:line` (the repository's folders without the checkout's path). */
export function functionOf(n: ProfileNode): string {
  const f = n.callFrame;
  const where =
    f.url === ""
      ? ""
      : ` ${f.url.replace(/^.*node_modules\//, "").replace(/^file:\/\/.*?\/(?=(core|bridge|functions|emulator|cli|bench)\/)/, "")}:${f.lineNumber + 1}`;
  return `${f.functionName || "(anonymous)"}${where}`;
}

/** Reads a `.cpuprofile` file. */
export const readProfile = (file: string): CpuProfile => JSON.parse(readFileSync(file, "utf8")) as CpuProfile;

function main(file: string, top: number): void {
  const profile = readProfile(file);
  const fn = functionOf;
  const print = (title: string, rows: Share[]) => {
    console.log(`\n${title}`);
    for (const r of rows.slice(0, top)) console.log(`${String(r.percent).padStart(5)}%  ${String(r.ms).padStart(7)} ms  ${r.name}`);
  };
  print(
    "self time by area",
    selfTime(profile, (n) => areaOf(n.callFrame.url)),
  );
  print("self time by function", selfTime(profile, fn));
}

if (import.meta.main) main(process.argv[2] ?? "", Number(process.argv[3] ?? 20));
