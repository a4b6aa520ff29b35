// The operators' CRDs on a cluster, as `crdfn dev`, the benchmarks and the tests install them
// before anything watches: generated as deployed (deploy/crd.ts), applied server-side, and waited
// for until the API server serves them.
import { ApiException, KubernetesObjectApi, PatchStrategy, loadYaml, type KubeConfig, type KubernetesObject } from "@kubernetes/client-node";
import { stringify } from "yaml";
import type { Operator } from "../../core/operator.ts";
import { crdName, crdOf } from "../../deploy/crd.ts";
import { SetupError } from "../../emulator/errors.ts";

/** The API server's own message (its Status body), not the client's dump of the response. */
function apiMessage(e: unknown): string {
  if (!(e instanceof ApiException)) return e instanceof Error ? e.message : String(e);
  try {
    return (JSON.parse(String(e.body)) as { message?: string }).message ?? `HTTP ${e.code}`;
  } catch {
    return `HTTP ${e.code}`;
  }
}

type InstalledCrd = KubernetesObject & { status?: { storedVersions?: string[]; conditions?: { type: string; status: string }[] } };

async function readCrd(api: KubernetesObjectApi, name: string): Promise<InstalledCrd | undefined> {
  try {
    return await api.read<InstalledCrd>({ apiVersion: "apiextensions.k8s.io/v1", kind: "CustomResourceDefinition", metadata: { name } });
  } catch (e) {
    if (e instanceof ApiException && e.code === 404) return undefined;
    throw e;
  }
}

/**
 * Installs (server-side apply) each operator's generated CRD and waits until it is served. A
 * version already in the installed CRD's status.storedVersions stays listed (unserved) even if
 * the operator dropped it, as the API server requires; the returned notes say which.
 */
export async function installCrds(kubeConfig: KubeConfig, operators: ReadonlyArray<Operator<unknown>>): Promise<string[]> {
  const api = KubernetesObjectApi.makeApiClient(kubeConfig);
  const notes: string[] = [];
  for (const op of operators) {
    const name = crdName(op);
    const stored = (await readCrd(api, name))?.status?.storedVersions ?? [];
    const generated = crdOf(op, stored);
    const kept = stored.filter((v) => !(op.resource.versions ?? [{ name: op.resource.version }]).some((d) => d.name === v));
    if (kept.length) notes.push(`CRD ${name} keeps ${kept.join(", ")} (objects may still be stored so), unserved`);
    // loadYaml yields client-node's typed model; a plain object would lose the
    // `x-kubernetes-*` keys in its serializer (status would then be pruned to {}).
    const crd = loadYaml<KubernetesObject>(stringify(generated));
    try {
      await api.patch(crd, undefined, undefined, "crdfn-dev", true, PatchStrategy.ServerSideApply);
    } catch (e) {
      throw new SetupError(`applying CRD ${name}: ${apiMessage(e)}`);
    }
  }
  for (const op of operators) {
    const name = crdName(op);
    for (let i = 0; ; i++) {
      const crd = await readCrd(api, name);
      if (crd?.status?.conditions?.some((c) => c.type === "Established" && c.status === "True")) break;
      if (i > 300) throw new Error(`CRD ${name} was not Established within 30s`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  return notes;
}
