// `crdfn repair KIND/NAME`: lowers the fences of an object's children that stand above its
// generation. A child's crdfn.io/parent-generation only ever comes from the generation the
// function applied it from, and a parent's generations only grow, so a fence above the live
// generation was raised by hand or by a tool (an admin's `kubectl annotate`, a copy of
// annotations from a backup): the policy refuses every later apply of the child as "from an older
// generation", and the function reports the object Ready=False, FenceAhead (functions/runtime/
// children.ts). The policy binds only the function's identity, so this runs as the person, with
// their kubeconfig: it writes nothing but the fence, each child with a resourceVersion precondition,
// and the change of the child announces the object to the function again.
import { Command } from "commander";
import { PARENT_GENERATION_ANNOTATION } from "../../core/event.ts";
import { fenceOf } from "../../core/fence.ts";
import type { Operator } from "../../core/operator.ts";
import { loadKubeconfig } from "../../clients/kubeconfig.ts";
import { listOwnedBy } from "../../functions/runtime/children.ts";
import { createKubeApi } from "../../functions/runtime/kube-api-http.ts";
import type { KubeApi, KubeObject } from "../../functions/runtime/kube-api.ts";
import { SetupError } from "../../emulator/errors.ts";
import { DEFAULT_SETTINGS, projectOperators, selectOperators } from "../operators.ts";
import { adminEnv } from "../environment.ts";

/** One child whose fence stood above its parent's generation. */
export interface LoweredFence {
  child: string;
  from: number;
  to: number;
}

const controlledBy = (o: KubeObject, uid: string): boolean =>
  ((o.metadata.ownerReferences as Array<{ uid?: string; controller?: boolean }> | undefined) ?? []).some((r) => r.controller === true && r.uid === uid);

/** Lowers every fence of `parent`'s children above its generation to it; `dryRun`: only says which. */
export async function repairFences(api: KubeApi, operator: Operator<unknown>, parent: KubeObject, dryRun: boolean): Promise<LoweredFence[]> {
  const generation = parent.metadata.generation ?? 0;
  const uid = parent.metadata.uid ?? "";
  const lowered: LoweredFence[] = [];
  for (const owned of operator.owns) {
    for (const child of await listOwnedBy(api, owned, parent)) {
      const fence = fenceOf(child);
      if (fence === undefined || fence <= generation || !controlledBy(child, uid)) continue;
      const ref = {
        group: owned.group,
        version: owned.version,
        plural: owned.plural,
        name: child.metadata.name,
        ...(child.metadata.namespace ? { namespace: child.metadata.namespace } : {}),
      };
      if (!dryRun)
        await api.mergePatch(
          ref,
          { metadata: { resourceVersion: child.metadata.resourceVersion, annotations: { [PARENT_GENERATION_ANNOTATION]: String(generation) } } },
          "crdfn-repair",
        );
      lowered.push({
        child: `${owned.kind} ${child.metadata.namespace ? `${child.metadata.namespace}/` : ""}${child.metadata.name}`,
        from: fence,
        to: generation,
      });
    }
  }
  return lowered;
}

export function repairCommand(): Command {
  return new Command("repair")
    .description(`lower the ${PARENT_GENERATION_ANNOTATION} fences of an object's children that stand above its generation (Ready=False, FenceAhead)`)
    .argument("<object>", "kind/name of the object (Kind, plural or singular)")
    .option("--operator <file...>", "your operator module(s) (default: those ./crdfn.deploy.yaml lists, else this checkout's examples)")
    .option("-n, --namespace <ns>", "the object's namespace", "default")
    .option("--dry-run", "say which fences would be lowered; write nothing")
    .option("--kubeconfig <file>", "kubeconfig (default: KUBECONFIG, .crdfn/env, ~/.kube/config)")
    .option("--context <name>", "kubeconfig context")
    .option("--state-dir <dir>", "where crdfn dev wrote its env", ".crdfn")
    .addHelpText(
      "after",
      "\nExit status: 0 repaired (or nothing to repair), 2 a setup error.\n" +
        "Needs: get on the object's kind; list and patch on its owned kinds (your own identity: the function's may not lower a fence).\n" +
        "\nExamples:\n  $ crdfn repair greeting/hello -n default --operator operator.ts\n  $ crdfn repair web/shop --dry-run",
    )
    .action(
      async (target: string, opts: { operator?: string[]; namespace: string; dryRun?: boolean; kubeconfig?: string; context?: string; stateDir: string }) => {
        const [kind, name] = target.split("/", 2);
        if (!kind || !name) throw new SetupError(`${target}: name the object as kind/name`);
        const operators = opts.operator?.length ? await selectOperators(opts.operator, false) : await projectOperators(DEFAULT_SETTINGS);
        const operator = operators.find((o) => [o.resource.kind, o.resource.plural, o.resource.singular].some((n) => n?.toLowerCase() === kind.toLowerCase()));
        if (operator === undefined) throw new SetupError(`no operator given manages ${kind}: name it with --operator`);
        const env = adminEnv(opts.stateDir);
        const { kubeConfig } = loadKubeconfig(opts.kubeconfig ?? env.KUBECONFIG, opts.context, env);
        const api = createKubeApi({ connection: kubeConfig });
        const { resource } = operator;
        const namespaced = resource.scope !== "Cluster";
        const parent = await api.get({
          group: resource.group,
          version: resource.version,
          plural: resource.plural,
          name,
          ...(namespaced ? { namespace: opts.namespace } : {}),
        });
        const where = `${resource.kind} ${namespaced ? `${opts.namespace}/` : ""}${name}`;
        if (!parent) throw new SetupError(`${where} not found${namespaced ? ` in namespace ${opts.namespace}` : ""}`);
        const lowered = await repairFences(api, operator, parent, opts.dryRun === true);
        for (const l of lowered) console.log(`${opts.dryRun ? "would lower" : "lowered"} ${l.child}: ${PARENT_GENERATION_ANNOTATION} ${l.from} → ${l.to}`);
        console.log(
          lowered.length === 0
            ? `nothing to repair: no child of ${where} carries a fence above its generation ${parent.metadata.generation ?? 0}`
            : `${lowered.length} fence(s) of ${where} ${opts.dryRun ? "would be " : ""}lowered to its generation ${parent.metadata.generation ?? 0}` +
                (opts.dryRun ? "" : "; its next reconcile (announced by the children's change) applies them"),
        );
      },
    );
}
