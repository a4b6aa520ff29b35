// Which versions a generated CRD must keep: every version a cluster still stores objects as
// (status.storedVersions). The API server refuses a CRD that leaves one out, so `crdfn crd` and
// `crdfn generate` either read them from the cluster (--kubeconfig) and keep them unserved, or,
// without a cluster, compare with the CRD they generated before and refuse, in one line, to drop a
// version objects may be stored as: the operator then declares it retired ({ served: false }).
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { ApiException, KubeConfig, KubernetesObjectApi, type KubernetesObject } from "@kubernetes/client-node";
import { parse } from "yaml";
import type { Operator } from "../../core/operator.ts";
import { crdName, droppedVersions, undeclaredVersions } from "../../deploy/crd.ts";
import { SetupError } from "../../emulator/errors.ts";

export interface ClusterSource {
  kubeconfig: string;
  context?: string;
}

const firstLine = (e: unknown): string => {
  if (e instanceof ApiException) {
    try {
      return (JSON.parse(String(e.body)) as { message?: string }).message ?? `HTTP ${e.code}`;
    } catch {
      return `HTTP ${e.code}`;
    }
  }
  return (e instanceof Error ? e.message : String(e)).split("\n")[0] ?? "";
};

/** status.storedVersions of each operator's installed CRD (none when it is not installed), by CRD name. */
export async function clusterStoredVersions(source: ClusterSource, operators: ReadonlyArray<Operator<unknown>>): Promise<Map<string, string[]>> {
  const where = `--kubeconfig ${source.kubeconfig}`;
  if (!existsSync(source.kubeconfig)) throw new SetupError(`${where}: no such file`);
  const kc = new KubeConfig();
  try {
    kc.loadFromFile(source.kubeconfig);
  } catch (e) {
    throw new SetupError(`${where}: not a kubeconfig (${firstLine(e)})`);
  }
  if (source.context) {
    if (!kc.getContextObject(source.context)) throw new SetupError(`--context ${source.context}: no such context in ${source.kubeconfig}`);
    kc.setCurrentContext(source.context);
  }
  const api = KubernetesObjectApi.makeApiClient(kc);
  const stored = new Map<string, string[]>();
  for (const op of operators) {
    const name = crdName(op);
    try {
      const crd = await api.read<KubernetesObject & { status?: { storedVersions?: string[] } }>({
        apiVersion: "apiextensions.k8s.io/v1",
        kind: "CustomResourceDefinition",
        metadata: { name },
      });
      stored.set(name, crd.status?.storedVersions ?? []);
    } catch (e) {
      if (e instanceof ApiException && e.code === 404) continue;
      throw new SetupError(`${where} (context ${kc.getCurrentContext()}): cannot read CRD ${name}: ${firstLine(e)}`);
    }
  }
  return stored;
}

/** One line per CRD that keeps a version only because the cluster stores it. */
export function keptNotes(operators: ReadonlyArray<Operator<unknown>>, stored: ReadonlyMap<string, readonly string[]>): string[] {
  return operators.flatMap((op) => {
    const kept = undeclaredVersions(op, stored.get(crdName(op)) ?? []);
    if (kept.length === 0) return [];
    const retired = kept.map((v) => `{ name: "${v}", served: false }`).join(", ");
    return [
      `CRD ${crdName(op)} keeps ${kept.join(", ")}, unserved: the cluster still stores objects as ${kept.length === 1 ? "it" : "them"} (declare ${retired} in resource.versions to generate the same without the cluster)`,
    ];
  });
}

/**
 * Refuses when the CRD generated before (its file in `dir`, if there is one; `shownDir` names
 * that folder in the message) could hold objects as a version the operator no longer declares.
 */
export function refuseDroppedVersions(operators: ReadonlyArray<Operator<unknown>>, dir: string, shownDir: string): void {
  for (const op of operators) {
    const file = join(dir, `${crdName(op)}.yaml`);
    if (!existsSync(file)) continue;
    let previous: unknown;
    try {
      previous = parse(readFileSync(file, "utf8"));
    } catch {
      continue;
    }
    const dropped = droppedVersions(op, previous);
    if (dropped.length === 0) continue;
    const retired = dropped.map((v) => `{ name: "${v}", served: false }`).join(", ");
    throw new SetupError(
      `${join(shownDir, `${crdName(op)}.yaml`)} has ${dropped.join(", ")}, which ${op.resource.kind} no longer declares: objects may still be stored as ${dropped.length === 1 ? "it" : "them"} and the API server refuses a CRD without ${dropped.length === 1 ? "it" : "them"}; ` +
        `declare ${retired} in resource.versions (retired), or pass --kubeconfig to keep what the cluster stores`,
    );
  }
}
