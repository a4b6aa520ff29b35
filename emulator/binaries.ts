// Real control-plane binaries for tests and the emulator: built once from the pinned Go
// wrapper module in infra/controlplane (go-build.ts), cached outside the repo by a hash of that
// pin, or taken from KUBEBUILDER_ASSETS / CRDFN_BIN_DIR.
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { SetupError } from "./errors.ts";
import { buildOnce, pinHash } from "./go-build.ts";
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

/** What a start-up not given them reads and reports to: this process's environment, and stderr. */
export const withSetupDefaults = (opts: Partial<BinaryOptions>): BinaryOptions => ({
  env: opts.env ?? process.env,
  log: opts.log ?? ((line) => console.error(line)),
});

export async function controlPlaneBinaries({ env, log }: BinaryOptions): Promise<ControlPlaneBinaries> {
  const version = pinnedKubernetesVersion();
  if (env.CRDFN_BIN_DIR) return fromDir(env.CRDFN_BIN_DIR, "CRDFN_BIN_DIR", version);
  if (env.KUBEBUILDER_ASSETS) return fromDir(env.KUBEBUILDER_ASSETS, "KUBEBUILDER_ASSETS", version);

  const dir = join(cacheRoot(env), "bin", `${version}-${pinHash(moduleDir, ["go.mod", "go.sum", "etcd/main.go"], ldflags(version))}`);
  const complete = () => names.every((n) => existsSync(join(dir, n)));
  if (!complete()) {
    await buildOnce({
      what: `etcd, kube-apiserver, kube-controller-manager and kubectl ${version}`,
      moduleDir,
      dir,
      args: (out) => [
        "-ldflags",
        ldflags(version),
        "-o",
        `${out}/`,
        "k8s.io/kubernetes/cmd/kube-apiserver",
        "k8s.io/kubernetes/cmd/kube-controller-manager",
        "k8s.io/kubernetes/cmd/kubectl",
        "./etcd",
      ],
      complete,
      withoutGo: `Go is not installed, and it is needed once to build etcd and kube-apiserver ${version}: install Go ≥ 1.24, or set KUBEBUILDER_ASSETS (or CRDFN_BIN_DIR) to a folder holding etcd, kube-apiserver and kubectl`,
      takes: "5–20 min on 2 cores",
      staleLockMs: 3600_000,
      pollMs: 5000,
      env,
      log,
    });
  }
  return {
    etcd: join(dir, "etcd"),
    kubeApiServer: join(dir, "kube-apiserver"),
    kubeControllerManager: join(dir, "kube-controller-manager"),
    kubectl: join(dir, "kubectl"),
    kubernetesVersion: version,
    source: dir,
  };
}
