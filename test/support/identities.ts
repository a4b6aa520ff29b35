// kubectl as a function's real identities, for attack tests: its ServiceAccount's token (a fresh
// kubectl with no admin credentials at all) and the Lambda role's group, impersonated by an admin
// exactly as an EKS access entry maps it (`--as` the role session, `--as-group crdfn:<operator>`).
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import type { LocalCluster } from "../../emulator/cluster.ts";

const run = promisify(execFile);

export type Kubectl = (args: string[], input?: string) => Promise<string>;

export function kubectlWith(cluster: LocalCluster, auth: string[], cwd?: string): Kubectl {
  return async (args, input) => {
    const child = run(cluster.kubectl, [...auth, ...args], { timeout: 90_000, maxBuffer: 16 * 1024 * 1024, ...(cwd ? { cwd } : {}) });
    if (input !== undefined) child.child.stdin?.end(input);
    return (await child).stdout;
  };
}

export const adminKubectl = (cluster: LocalCluster, cwd?: string): Kubectl => kubectlWith(cluster, ["--kubeconfig", cluster.kubeconfigPath], cwd);

export async function serviceAccountKubectl(cluster: LocalCluster, admin: Kubectl, name: string, namespace: string): Promise<Kubectl> {
  const token = (await admin(["create", "token", name, "-n", namespace, "--duration=10m"])).trim();
  return kubectlWith(cluster, ["--kubeconfig", "/dev/null", `--server=${cluster.server}`, `--certificate-authority=${cluster.caPath}`, `--token=${token}`]);
}

export function lambdaGroupKubectl(cluster: LocalCluster, operator: string): Kubectl {
  return kubectlWith(cluster, [
    "--kubeconfig",
    cluster.kubeconfigPath,
    `--as=arn:aws:sts::123456789012:assumed-role/crdfn-prod-${operator}-us-east-1/session`,
    `--as-group=crdfn:${operator}`,
    "--as-group=system:authenticated",
  ]);
}

export interface Denial {
  by: "RBAC" | "admission policy";
  message: string;
}

/** Runs an attack; resolves to who denied it and the API server's words, or rejects if it succeeded. */
export async function denied(attack: Promise<unknown>): Promise<Denial> {
  try {
    await attack;
  } catch (e) {
    const stderr = String((e as { stderr?: string }).stderr ?? (e as Error).message).trim();
    const line = stderr.split("\n").find((l) => /Forbidden|forbidden|denied/.test(l)) ?? stderr;
    if (/ValidatingAdmissionPolicy/.test(line)) return { by: "admission policy", message: line };
    if (/forbidden: User/.test(line) || /\(Forbidden\)/.test(line)) return { by: "RBAC", message: line };
    throw new Error(`failed, but not as a denial: ${stderr}`);
  }
  throw new Error("the attack succeeded");
}
