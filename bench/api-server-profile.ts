// The API server's CPU profile while a bench's requests run, and where its admission policies'
// share of it goes. Go's own profiler (the API server serves /debug/pprof to the admin) is the
// only view inside the server: /proc says how much CPU a request costs, not on what.
// Profiles are taken back to back, `seconds` each, until the work is done (a pprof profile cannot
// be stopped early), fetched with the cluster's own kubectl (`get --raw` writes the bytes as they
// come: the JSON HTTP client of this repository reads text), merged and summarised with
// `go tool pprof` when Go is on PATH (it is wherever the harness built the control plane).
import { execFile, spawn } from "node:child_process";
import { createWriteStream, mkdirSync, rmSync } from "node:fs";
import { dirname } from "node:path";
import { promisify } from "node:util";
import type { LocalCluster } from "../emulator/types.ts";

const run = promisify(execFile);

/** Functions whose cumulative time the summary reports (substrings of pprof's names). */
export const POLICY_FRAMES = {
  /** A ValidatingAdmissionPolicy's whole evaluation of a request: match conditions, validations, messages, audit annotations. */
  policy: "policy/validating.(*validator).Validate",
  /** Building the CEL inputs (object, oldObject, request to unstructured), once per expression list. */
  activation: "admission/plugin/cel.newActivation",
  /** The policy's match conditions. */
  matchConditions: "matchconditions.(*matcher).Match",
} as const;

/**
 * The policy's lists of expressions by the line of k8s.io/apiserver v0.34.4 (the pinned release:
 * emulator/binaries.ts) that evaluates each; each builds its own CEL inputs (newActivation), the
 * messages and audit annotations even when every validation passes.
 */
export const POLICY_SITES = {
  validations: "policy/validating/validator.go:109",
  messages: "policy/validating/validator.go:122",
  auditAnnotations: "policy/validating/validator.go:196",
} as const;

/**
 * Where an operator's API-server CPU goes: each sample in the first category whose pattern a
 * frame of its stack matches, so every sample is counted once. A write's storage work runs in a
 * goroutine of its own (handlers/finisher), named after the handler that started it; a custom
 * resource's handlers are apiextensions' (crdHandler.serveStatus.UpdateResource…).
 */
export const REQUEST_CATEGORIES: ReadonlyArray<readonly [string, RegExp]> = [
  ["policy", /validating\.\(\*validator\)\.Validate/],
  ["gc", /runtime\.(gcBgMarkWorker|bgsweep|bgscavenge)/],
  ["watch serving", /WatchServer\)\.HandleHTTP|serveWatch/],
  ["create", /CreateResource|createHandler|CreateNamedResource/],
  ["patch", /PatchResource|\(\*patcher\)/],
  ["update", /UpdateResource/],
  ["get", /GetResource|getResourceHandler/],
  ["list", /ListResource/],
  ["watch fan-out", /cacheWatcher|dispatchEvent/],
  ["watch cache", /watchCache|etcd3\.\(\*watchChan|etcd3\.\(\*watcher/],
  ["authentication", /authenticat/i],
  ["authorization", /authoriz/i],
  ["HTTP and TLS", /net\/http|crypto\/tls/],
  ["etcd client", /go\.etcd\.io|google\.golang\.org\/grpc/],
];

/** Reads `go tool pprof -traces` output: seconds per category (REQUEST_CATEGORIES' order decides), "other" for the rest, and the total. */
export function traceCategories(
  traces: string,
  categories: ReadonlyArray<readonly [string, RegExp]>,
): { totalSeconds: number; seconds: Record<string, number> } {
  const seconds: Record<string, number> = Object.fromEntries([...categories.map(([name]) => [name, 0] as const), ["other", 0] as const]);
  let totalSeconds = 0;
  for (const block of traces.split(/^-+\+-+$/m)) {
    const lines = block.split("\n").filter((l) => l.trim() !== "");
    const head = /^\s*([\d.]+[a-zµ]+)\s+(.*)$/.exec(lines[0] ?? "");
    if (head === null) continue;
    const d = duration(head[1]!);
    if (!Number.isFinite(d)) continue;
    totalSeconds += d;
    const stack = [head[2]!, ...lines.slice(1)].join("\n");
    const category = categories.find(([, pattern]) => pattern.test(stack))?.[0] ?? "other";
    seconds[category] = (seconds[category] ?? 0) + d;
  }
  return { totalSeconds, seconds };
}

/** A merged profile, summarised: CPU seconds in all and by the keys asked for. */
export interface ApiServerProfile<K extends string = string> {
  file: string;
  totalSeconds: number;
  seconds: Record<K, number>;
}

/** The admission policy's share of a profile (POLICY_FRAMES, POLICY_SITES). */
export type PolicySeconds = ApiServerProfile<keyof typeof POLICY_FRAMES | keyof typeof POLICY_SITES>;

const UNIT: Record<string, number> = { ns: 1e-9, us: 1e-6, µs: 1e-6, ms: 1e-3, s: 1, min: 60, h: 3600 };
const duration = (text: string): number => {
  const m = /^([\d.]+)([a-zµ]+)$/.exec(text);
  return m ? Number(m[1]) * (UNIT[m[2]!] ?? Number.NaN) : Number.NaN;
};

/** Reads `go tool pprof -top -cum` output: the total sampled and the cumulative time of each frame asked for (the first row naming it). */
export function summarise<K extends string>(top: string, frames: Record<K, string>): { totalSeconds: number; seconds: Record<K, number> } {
  const total = /Total samples = ([\d.]+[a-zµ]+)/.exec(top)?.[1];
  const rows = top.split("\n").map((line) => line.trim().split(/\s+/));
  const seconds = {} as Record<K, number>;
  for (const [key, frame] of Object.entries(frames) as Array<[K, string]>) {
    // flat flat% sum% cum cum% name…
    const row = rows.find((r) => r.length >= 6 && r.slice(5).join(" ").includes(frame));
    seconds[key] = row ? duration(row[3]!) : 0;
  }
  return { totalSeconds: total === undefined ? 0 : duration(total), seconds };
}

/** One profile of `seconds`, written to `file`. */
async function profileOnce(cluster: Pick<LocalCluster, "kubectl" | "kubeconfigPath">, seconds: number, file: string): Promise<void> {
  const child = spawn(cluster.kubectl, ["--kubeconfig", cluster.kubeconfigPath, "get", "--raw", `/debug/pprof/profile?seconds=${seconds}`], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  const out = createWriteStream(file);
  child.stdout.pipe(out);
  let stderr = "";
  child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
  const code = await new Promise<number | null>((resolve, reject) => {
    child.on("error", reject);
    child.on("close", resolve);
  });
  await new Promise((resolve) => out.close(resolve));
  if (code !== 0) throw new Error(`the API server's CPU profile: kubectl exited ${code}: ${stderr.trim()}`);
}

/** Whether `go` runs: without it the profile is kept unmerged and unsummarised. */
async function goWorks(): Promise<boolean> {
  return run("go", ["version"]).then(
    () => true,
    () => false,
  );
}

/** A profile being taken, back to back, until stopped. */
export interface ApiServerProfiling {
  /** Waits for the profile under way to end, then merges and summarises by frame (`summarise`); undefined without Go (the parts are kept). */
  stop<F extends string, L extends string>(
    frames: Record<F, string>,
    lines: Record<L, string>,
  ): Promise<{ summary: ApiServerProfile<F | L> | undefined; parts: string[] }>;
  /** The same, each sample counted once in its first matching category (traceCategories). */
  stopByCategory(categories: ReadonlyArray<readonly [string, RegExp]>): Promise<{ summary: ApiServerProfile | undefined; parts: string[] }>;
  /** Ends the loop once the profile under way ends, neither merging nor summarising (the measured work failed). */
  abandon(): Promise<void>;
}

/** Starts profiling the API server, `seconds` per part, into `file` (.pb.gz) once stopped. */
export function startApiServerProfile(cluster: Pick<LocalCluster, "kubectl" | "kubeconfigPath">, file: string, seconds = 5): ApiServerProfiling {
  let done = false;
  const parts: string[] = [];
  mkdirSync(dirname(file), { recursive: true });
  // A failed part ends the loop; its error is the stop's, so the run it measures is not cut short.
  let failure: Error | undefined;
  const loop = (async () => {
    while (!done) {
      const part = `${file}.${parts.length + 1}`;
      parts.push(part);
      await profileOnce(cluster, seconds, part);
    }
  })().catch((e: unknown) => {
    failure = e instanceof Error ? e : new Error(String(e));
  });
  const ended = async (): Promise<void> => {
    done = true;
    await loop;
  };
  /** Ends the loop and merges the parts into `file`; false without Go (the parts are kept). */
  const merged = async (): Promise<boolean> => {
    await ended();
    if (failure !== undefined) throw failure;
    if (!(await goWorks())) return false;
    await run("go", ["tool", "pprof", "-proto", `-output=${file}`, ...parts]);
    for (const p of parts) rmSync(p);
    return true;
  };
  const pprof = async (...flags: string[]) => (await run("go", ["tool", "pprof", ...flags, file], { maxBuffer: 1024 * 1024 * 1024 })).stdout;
  return {
    async stop(frames, lines) {
      if (!(await merged())) return { summary: undefined, parts };
      const top = (...flags: string[]) => pprof("-top", "-cum", "-nodecount=100000", ...flags);
      const byFunction = summarise(await top(), frames);
      const byLine = summarise(await top("-lines"), lines);
      return { summary: { file, totalSeconds: byFunction.totalSeconds, seconds: { ...byFunction.seconds, ...byLine.seconds } }, parts: [file] };
    },
    async stopByCategory(categories) {
      if (!(await merged())) return { summary: undefined, parts };
      return { summary: { file, ...traceCategories(await pprof("-traces"), categories) }, parts: [file] };
    },
    abandon: ended,
  };
}

/** Runs `work` while the API server is profiled, and summarises the admission policy's share (POLICY_FRAMES, POLICY_SITES). */
export async function profiled<T>(
  cluster: Pick<LocalCluster, "kubectl" | "kubeconfigPath">,
  file: string,
  work: () => Promise<T>,
  seconds = 5,
): Promise<{ result: T; summary: PolicySeconds | undefined; parts: string[] }> {
  const profiling = startApiServerProfile(cluster, file, seconds);
  let result: T;
  try {
    result = await work();
  } catch (e) {
    await profiling.abandon();
    throw e;
  }
  return { result, ...(await profiling.stop(POLICY_FRAMES, POLICY_SITES)) };
}
