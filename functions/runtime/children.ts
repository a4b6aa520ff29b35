// Writing what reconcile asked for: owned children (controller owner reference) and shared
// objects (a field manager per parent), by server-side apply.
import { PermanentError } from "../../core/errors.ts";
import type { DesiredObject, ReconcileResult } from "../../core/operator.ts";
import { sharedFieldManager } from "./finalizer.ts";
import type { KubeObject } from "./kube-api.ts";
import { ownedRef } from "./owned-kinds.ts";
import type { Step } from "./step.ts";

export async function applyChildren(step: Step, parent: KubeObject, result: ReconcileResult): Promise<void> {
  const { operator } = step;
  const ownerReference = { apiVersion: operator.apiVersion, kind: operator.resource.kind, name: parent.metadata.name, uid: parent.metadata.uid ?? "", controller: true, blockOwnerDeletion: true };
  for (const child of result.children ?? []) await applyDesired(step, child, parent, { ownerReferences: [ownerReference] }, operator.fieldManager);
  for (const shared of result.shared ?? []) await applyDesired(step, shared, parent, {}, sharedFieldManager(step, parent));
}

async function applyDesired(step: Step, desired: DesiredObject, parent: KubeObject, extraMeta: Record<string, unknown>, fieldManager: string): Promise<void> {
  const namespace = desired.metadata.namespace ?? parent.metadata.namespace;
  const target = ownedRef(step.operator, desired.apiVersion, desired.kind, namespace, desired.metadata.name);
  if (!target) throw new PermanentError(`${desired.kind} (${desired.apiVersion}) is not among the kinds this operator owns`, "InvalidReconcileResult");
  const body: KubeObject = { ...desired, metadata: { ...desired.metadata, ...(target.namespace ? { namespace: target.namespace } : {}), ...extraMeta } };
  await step.api.apply(target, body, fieldManager);
}
