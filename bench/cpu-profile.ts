// Where a `node --cpu-prof` profile spent its time: self time by function and by package.
//   node bench/cpu-profile.ts <file.cpuprofile> [top=20]
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";

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

/** What a bench reports of a process's profile: its file, its total, the top self time by function and by area. */
export interface ProfileSummary {
  file: string;
  totalMs: number;
  byFunction: Share[];
  byArea: Share[];
}

/** Self time of the one profile Node wrote into `dir` at exit (`--cpu-prof-dir`), if it did. */
export function summarizeProfileDir(dir: string): ProfileSummary | undefined {
  if (!existsSync(dir)) return undefined;
  const file = readdirSync(dir).find((f) => f.endsWith(".cpuprofile"));
  if (file === undefined) return undefined;
  const profile = readProfile(join(dir, file));
  const byFunction = selfTime(profile, functionOf);
  return {
    file: join(dir, file),
    totalMs: byFunction.reduce((s, r) => s + r.ms, 0),
    byFunction: byFunction.slice(0, 15),
    byArea: selfTime(profile, (n) => areaOf(n.callFrame.url)).slice(0, 10),
  };
}

/** crdfn's bridge and function process profiles (bench/peers/systems.ts writes them into `dir`/bridge and `dir`/functions). */
export function crdfnProfiles(dir: string, log: (line: string) => void): Record<string, ProfileSummary> {
  const out: Record<string, ProfileSummary> = {};
  for (const part of ["bridge", "functions"]) {
    const p = summarizeProfileDir(join(dir, part));
    if (p) out[part] = p;
    else log(`  no CPU profile of the ${part} in ${join(dir, part)}`);
  }
  return out;
}

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
