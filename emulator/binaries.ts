// Real control-plane binaries for tests and the emulator: built once from the pinned Go
// wrapper module in infra/controlplane, cached outside the repo by a hash of that pin, or
// taken from KUBEBUILDER_ASSETS / CRDFN_BIN_DIR.
import { spawn, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";
import { SetupError } from "./errors.ts";
import { cacheRoot, packageRoot } from "./paths.ts";

export interface ControlPlaneBinaries {
  etcd: string;
  kubeApiServer: string;
  /** Absent when taken from envtest assets, which do not ship it. */
  kubeControllerManager?: string;
  /** kubectl of the same release (envtest assets ship one too), so tests never depend on the machine's. */
  kubectl: string;
  kubernetesVersion: string;
  source: string;
}

const moduleDir = join(packageRoot, "infra", "controlplane");

/** The Kubernetes version pinned in the wrapper module: the one source of truth. */
export function pinnedKubernetesVersion(): string {
  const mod = readFileSync(join(moduleDir, "go.mod"), "utf8");
  const m = /^\s*k8s\.io\/kubernetes (v\d+\.\d+\.\d+)/m.exec(mod);
  if (!m?.[1]) throw new SetupError(`infra/controlplane/go.mod does not pin k8s.io/kubernetes`);
  return m[1];
}

function ldflags(version: string): string {
  const [major, minor] = version.slice(1).split(".");
  // /version must report the real release, as a kubeadm-built binary does.
  const vars = ["k8s.io/component-base/version", "k8s.io/client-go/pkg/version"].flatMap((pkg) => [
    `-X ${pkg}.gitVersion=${version}`,
    `-X ${pkg}.gitMajor=${major}`,
    `-X ${pkg}.gitMinor=${minor}`,
    `-X ${pkg}.gitTreeState=clean`,
  ]);
  return ["-s", "-w", ...vars].join(" ");
}

function pinHash(version: string): string {
  const h = createHash("sha256");
  for (const f of ["go.mod", "go.sum", "etcd/main.go"]) h.update(readFileSync(join(moduleDir, f)));
  h.update(ldflags(version));
  return h.digest("hex").slice(0, 12);
}

const names = ["etcd", "kube-apiserver", "kube-controller-manager", "kubectl"] as const;

function fromDir(dir: string, setting: string, version: string): ControlPlaneBinaries {
  const at = (n: string) => join(dir, n);
  for (const n of ["etcd", "kube-apiserver", "kubectl"]) {
    if (!existsSync(at(n))) throw new SetupError(`${setting}=${dir} has no ${n} binary`);
  }
  return {
    etcd: at("etcd"),
    kubeApiServer: at("kube-apiserver"),
    kubectl: at("kubectl"),
    ...(existsSync(at("kube-controller-manager")) ? { kubeControllerManager: at("kube-controller-manager") } : {}),
    kubernetesVersion: version,
    source: setting,
  };
}

export interface BinaryOptions {
  env: NodeJS.ProcessEnv;
  log: (line: string) => void;
}

export async function controlPlaneBinaries({ env, log }: BinaryOptions): Promise<ControlPlaneBinaries> {
  const version = pinnedKubernetesVersion();
  if (env.CRDFN_BIN_DIR) return fromDir(env.CRDFN_BIN_DIR, "CRDFN_BIN_DIR", version);
  if (env.KUBEBUILDER_ASSETS) return fromDir(env.KUBEBUILDER_ASSETS, "KUBEBUILDER_ASSETS", version);

  const dir = join(cacheRoot(env), "bin", `${version}-${pinHash(version)}`);
  const complete = () => names.every((n) => existsSync(join(dir, n)));
  if (!complete()) await buildOnce(dir, version, complete, log, env);
  return {
    etcd: join(dir, "etcd"),
    kubeApiServer: join(dir, "kube-apiserver"),
    kubeControllerManager: join(dir, "kube-controller-manager"),
    kubectl: join(dir, "kubectl"),
    kubernetesVersion: version,
    source: dir,
  };
}

/** Serializes builds across processes (parallel test files, a CLI beside a test run). */
async function buildOnce(
  dir: string,
  version: string,
  complete: () => boolean,
  log: (line: string) => void,
  env: NodeJS.ProcessEnv,
): Promise<void> {
  mkdirSync(join(dir, ".."), { recursive: true });
  const lock = `${dir}.lock`;
  for (;;) {
    try {
      mkdirSync(lock);
      break;
    } catch {
      // A lock older than an hour belongs to a build that was killed.
      const held = statSync(lock, { throwIfNoEntry: false });
      if (held && Date.now() - held.mtimeMs > 3600_000) rmSync(lock, { recursive: true, force: true });
      log("waiting for another process that is building the control plane…");
      await new Promise((r) => setTimeout(r, 5000));
      if (complete()) return;
    }
  }
  try {
    if (!complete()) await build(dir, version, log, env);
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
}

async function build(dir: string, version: string, log: (line: string) => void, env: NodeJS.ProcessEnv): Promise<void> {
  const go = spawnSync("go", ["version"], { encoding: "utf8", env });
  if (go.error) {
    throw new SetupError(
      `Go is not installed, and it is needed once to build etcd and kube-apiserver ${version}: install Go ≥ 1.24, ` +
        `or set KUBEBUILDER_ASSETS (or CRDFN_BIN_DIR) to a folder holding etcd, kube-apiserver and kubectl`,
    );
  }
  const tmp = `${dir}.tmp-${process.pid}`;
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp, { recursive: true });
  log(`building etcd, kube-apiserver, kube-controller-manager and kubectl ${version} with ${go.stdout.trim()} (first run only; 5–20 min on 2 cores)`);
  log(`  cache: ${dir}`);
  const started = Date.now();
  const args = [
    "build",
    "-v",
    "-trimpath",
    "-ldflags",
    ldflags(version),
    "-o",
    `${tmp}/`,
    "k8s.io/kubernetes/cmd/kube-apiserver",
    "k8s.io/kubernetes/cmd/kube-controller-manager",
    "k8s.io/kubernetes/cmd/kubectl",
    "./etcd",
  ];
  const child = spawn("go", args, {
    cwd: moduleDir,
    env: { ...env, GOFLAGS: "-buildvcs=false -mod=readonly", CGO_ENABLED: "0" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  // `go build -v` names each package as it compiles it: count them to show progress.
  let packages = 0;
  let tail: string[] = [];
  const onOutput = (chunk: Buffer) => {
    const lines = chunk.toString().split("\n").filter(Boolean);
    packages += lines.length;
    tail = [...tail, ...lines].slice(-20);
  };
  child.stdout.on("data", onOutput);
  child.stderr.on("data", onOutput);
  const ticker = setInterval(() => {
    log(`  …${Math.round((Date.now() - started) / 1000)}s, ${packages} packages compiled`);
  }, 15_000);
  const code = await new Promise<number | null>((resolve) => child.on("close", resolve));
  clearInterval(ticker);
  if (code !== 0) {
    rmSync(tmp, { recursive: true, force: true });
    throw new SetupError(`building the control plane failed (go build exited ${code}):\n${tail.join("\n")}`);
  }
  rmSync(dir, { recursive: true, force: true });
  renameSync(tmp, dir);
  log(`built the control plane in ${Math.round((Date.now() - started) / 1000)}s`);
}
