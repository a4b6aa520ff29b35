// Writing what reconcile asked for. Owned children: checked (declared kind, parent's namespace,
// not someone else's object), applied only when they differ from what was last applied (fenced by
// the parent's generation, core/fence.ts), and the ones this parent applied before and no longer
// returns are pruned, from a view proven current. Shared objects: a field
// manager per parent, so server-side apply merges the contributions.
import { PermanentError } from "../../core/errors.ts";
import type { DesiredObject, ReconcileResult } from "../../core/operator.ts";
import { APPLIED_HASH_ANNOTATION, appliedHash, controllerRef, holds, type OwnerReference, PARENT_UID_LABEL } from "./child-labels.ts";
import { sharedFieldManager } from "./finalizer.ts";
import { ApiError } from "../../clients/kube-http.ts";
import { type KubeObject, type ResourceRef } from "./kube-api.ts";
import { childRef, readByName, type ChildKeys, type ObservedByKind } from "./observed-children.ts";
import { childMarkOf, childToken, type ChildMark } from "../../core/reconciled.ts";
import { isOwnershipRefusal } from "../../core/ownership.ts";
import { PARENT_GENERATION_ANNOTATION } from "../../core/event.ts";
import { fenceOf, mustRaiseFence } from "../../core/fence.ts";
import { keyOf } from "../../core/resource-path.ts";
import { ownedKind, ownedRef } from "./owned-kinds.ts";
import type { Step } from "./step.ts";

interface PlannedChild {
  ref: ResourceRef & { name: string };
  body: KubeObject;
  owned: NonNullable<ReturnType<typeof ownedKind>>;
  key: string;
}

/**
/**
 * Applies the children reconcile asked for (pruning the ones it no longer asks for is
 * `pruneChildren`, once the view is proven current). What the event's keys say is this parent's
 * and was last applied as wanted is left alone, unless its fence must be raised (core/fence.ts);
 * a child of an observed kind the keys do not name is read first, and written only if this parent
 * controls it (or it is an orphan to adopt); any other child is applied, and the API server
 * refuses a write onto an object another controls (the generated admission policy; two controller
 * references), or one from an older generation of the parent than the child's fence.
 * Resolves with what it asked for (what pruning spares) and the children it left, as the bridge's
 * index will know them (core/reconciled.ts).
 */
export async function writeChildren(step: Step, parent: KubeObject, result: ReconcileResult, keys: ChildKeys, observed: ObservedByKind): Promise<{ wanted: WantedChildren; left: ChildMark[] }> {
  const planned = (result.children ?? []).map((c) => planChild(step, parent, c));
  // Every check before any write: a refused child leaves the others as they were.
  const known = await Promise.all(planned.map((p) => (keys?.get(p.owned)?.has(p.key) ? Promise.resolve(undefined) : unknownChild(step, p, observed))));
  planned.forEach((p, i) => checkOwnership(step, parent, p, known[i]));
  const generation = parent.metadata.generation;
  const raise = (fence: number | undefined) => mustRaiseFence(step.event.generation, generation, fence);
  const left: ChildMark[] = [];
  const fieldManager = step.operator.fieldManager;
  for (const [i, p] of planned.entries()) {
    const key = keys?.get(p.owned)?.get(p.key);
    // The fence as last known: the key's, or the observed child's when it was read (both only lag behind).
    const fence = highest(key?.parentGeneration, fenceOf(observed.get(p.owned)?.get(p.key)));
    if (key !== undefined && key.appliedHash !== undefined && key.appliedHash === hashOf(p.body) && !raise(fence)) {
      left.push({ uid: key.uid, token: key.appliedHash });
      continue;
    }
    const there = known[i];
    if (there && hashOf(there) === hashOf(p.body) && holds(there, p.body) && !raise(fenceOf(there))) {
      left.push(childMarkOf(there, fieldManager));
      continue;
    }
    left.push(childMarkOf(await applyChild(step, p, generation), fieldManager));
  }
  for (const shared of result.shared ?? []) await applyShared(step, shared, parent);
  const wanted = new Set(planned.map((p) => `${p.owned.kind}|${p.key}`));
  return { wanted, left: [...left, ...keptUnwanted(keys, wanted)] };
}

/**
 * Children no longer wanted of kinds that are not pruned: still this parent's, so still in the
 * bridge's index. Only their keys are at hand: one someone else wrote since (no applied hash)
 * gets a token the bridge's never equals, and a new bridge announces its parent once more.
 */
function keptUnwanted(keys: ChildKeys, wanted: ReadonlySet<string>): ChildMark[] {
  const kept: ChildMark[] = [];
  for (const [owned, children] of keys ?? []) {
    if (owned.prune) continue;
    for (const [key, child] of children) if (!wanted.has(`${owned.kind}|${key}`)) kept.push({ uid: child.uid, token: childToken(child.appliedHash, "unknown") });
  }
  return kept;
}

/** The children reconcile asked for, as "kind|namespace/name": what pruning spares. */
export type WantedChildren = ReadonlySet<string>;

const highest = (a: number | undefined, b: number | undefined): number | undefined => (a === undefined ? b : b === undefined ? a : Math.max(a, b));

/** A child the keys do not name: of an observed kind, as it is there (read by name); of another kind, not read. */
async function unknownChild(step: Step, p: PlannedChild, observed: ObservedByKind): Promise<KubeObject | undefined> {
  if (!p.owned.observe) return undefined;
  return observed.get(p.owned)?.get(p.key) ?? (await readByName(step, p.owned, p.ref.namespace, p.ref.name));
}

/**
 * Applies a child fenced with the parent generation it was computed from (outside the applied
 * hash: an unchanged child is still skipped). A refusal of the write because another controls the
 * object becomes ChildConflict, naming it; the fence's refusal is left to be read as a conflict.
 */
async function applyChild(step: Step, p: PlannedChild, generation: number | undefined): Promise<KubeObject> {
  const annotations = { ...(p.body.metadata.annotations as Record<string, string>), ...(generation === undefined ? {} : { [PARENT_GENERATION_ANNOTATION]: String(generation) }) };
  try {
    return await step.api.apply(p.ref, { ...p.body, metadata: { ...p.body.metadata, annotations } }, step.operator.fieldManager);
  } catch (e) {
    if (e instanceof ApiError && isOwnershipRefusal(e)) throw new PermanentError(`${p.owned.kind} ${p.ref.namespace ? `${p.ref.namespace}/` : ""}${p.ref.name}: ${e.message}`, "ChildConflict");
    throw e;
  }
}

const hashOf = (o: KubeObject): string | undefined => (o.metadata.annotations as Record<string, string> | undefined)?.[APPLIED_HASH_ANNOTATION];

function planChild(step: Step, parent: KubeObject, desired: DesiredObject): PlannedChild {
  const { operator } = step;
  const owned = ownedKind(operator, desired.apiVersion, desired.kind);
  const what = `${desired.kind} ${desired.metadata.name}`;
  if (!owned) throw new PermanentError(`${what}: ${desired.kind} (${desired.apiVersion}) is not declared in owns`, "UndeclaredKind");
  const parentNamespace = parent.metadata.namespace;
  const namespaced = operator.resource.scope === "Namespaced";
  // The garbage collector only honours owner references within one namespace (or from a
  // cluster-scoped owner): anything else would be an orphan that reads as Ready.
  if (namespaced && !owned.namespaced) throw new PermanentError(`${what}: a namespaced ${operator.resource.kind} cannot own a cluster-scoped ${desired.kind}`, "ChildInOtherNamespace");
  if (namespaced && desired.metadata.namespace && desired.metadata.namespace !== parentNamespace) {
    throw new PermanentError(`${what}: namespace "${desired.metadata.namespace}" is not the parent's namespace "${parentNamespace ?? ""}"`, "ChildInOtherNamespace");
  }
  const namespace = owned.namespaced ? (desired.metadata.namespace ?? parentNamespace) : undefined;
  if (owned.namespaced && !namespace) throw new PermanentError(`${what}: a child of a cluster-scoped parent needs metadata.namespace`, "ChildWithoutNamespace");
  const ref = { ...(ownedRef(operator, desired.apiVersion, desired.kind, namespace) as ResourceRef), name: desired.metadata.name };
  const ownerReference = { apiVersion: operator.apiVersion, kind: operator.resource.kind, name: parent.metadata.name, uid: parent.metadata.uid ?? "", controller: true, blockOwnerDeletion: true };
  const unhashed: KubeObject = {
    ...desired,
    metadata: {
      ...desired.metadata,
      ...(namespace ? { namespace } : {}),
      labels: { ...desired.metadata.labels, [PARENT_UID_LABEL]: parent.metadata.uid ?? "" },
      ownerReferences: [ownerReference],
    },
  };
  const body = { ...unhashed, metadata: { ...unhashed.metadata, annotations: { ...desired.metadata.annotations, [APPLIED_HASH_ANNOTATION]: appliedHash(unhashed) } } };
  return { ref, body, owned, key: keyOf(namespace, desired.metadata.name) };
}

/** Never apply onto an object this parent does not control: like controller-runtime, no stealing. */
function checkOwnership(step: Step, parent: KubeObject, p: PlannedChild, there: KubeObject | undefined): void {
  if (!there) return;
  const ref = controllerRef(there);
  const controller = ref?.uid;
  if (controller === parent.metadata.uid) return;
  if (ref && earlierObjectOfThisName(step, parent, ref)) return;
  if (controller === undefined && p.owned.adopt) return;
  const where = `${p.owned.kind} ${p.ref.namespace ? `${p.ref.namespace}/` : ""}${p.ref.name}`;
  const why = controller ? `is controlled by another object (uid ${controller})` : `exists and is not controlled by this ${step.operator.resource.kind}; delete it, rename the child, or set adopt: true on ${p.owned.kind} in owns to adopt orphans`;
  throw new PermanentError(`${where} ${why}`, "ChildConflict");
}

/**
 * A controller reference to this parent's kind and name with another uid names an earlier object
 * of this name, deleted since (a name holds one object at a time and uids are never reused): its
 * child only waits for the garbage collector. A re-created parent takes it over at once instead
 * of reporting ChildConflict until the collector gets round to it.
 */
function earlierObjectOfThisName(step: Step, parent: KubeObject, ref: OwnerReference): boolean {
  const { apiVersion, resource } = step.operator;
  const group = (v: string | undefined) => (v?.includes("/") ? v.slice(0, v.indexOf("/")) : "");
  return ref.kind === resource.kind && group(ref.apiVersion) === group(apiVersion) && ref.name === parent.metadata.name && ref.uid !== parent.metadata.uid;
}

/**
 * Deletes what this parent applied before and no longer wants; the uid precondition spares a
 * same-named newcomer. A delete cannot be fenced like an apply, so it is made only from a view
 * proven current: called after the status write (whose resourceVersion precondition refuses a
 * stale view first), and, when there is something to delete, after a quorum read of the parent
 * shows the generation acted on is still its newest. When it is not, a newer event of the object
 * waits behind this one, and its reconcile prunes from its own view.
 */
export async function pruneChildren(step: Step, view: KubeObject, keys: ChildKeys, wanted: WantedChildren): Promise<void> {
  if (keys === undefined) return;
  const unwanted = [...keys].filter(([owned]) => owned.prune).flatMap(([owned, children]) => [...children].filter(([key]) => !wanted.has(`${owned.kind}|${key}`)).map(([, child]) => ({ owned, child })));
  if (unwanted.length === 0) return;
  const current = await step.api.get(step.ref);
  if (current?.metadata.uid !== view.metadata.uid || current?.metadata.generation !== view.metadata.generation) {
    step.log.debug({ acted: view.metadata.generation, current: current?.metadata.generation }, "not pruning from a view that is no longer current");
    return;
  }
  for (const { owned, child } of unwanted) {
    try {
      await step.api.delete(childRef(owned, child.namespace, child.name), { uid: child.uid });
    } catch (e) {
      if (!(e instanceof ApiError && e.code === 409)) throw e;
    }
  }
}

async function applyShared(step: Step, desired: DesiredObject, parent: KubeObject): Promise<void> {
  const target = ownedRef(step.operator, desired.apiVersion, desired.kind, desired.metadata.namespace ?? parent.metadata.namespace, desired.metadata.name);
  if (!target) throw new PermanentError(`${desired.kind} ${desired.metadata.name}: ${desired.kind} (${desired.apiVersion}) is not declared in owns`, "UndeclaredKind");
  const body: KubeObject = { ...desired, metadata: { ...desired.metadata, ...(target.namespace ? { namespace: target.namespace } : {}) } };
  await step.api.apply(target, body, sharedFieldManager(step, parent));
}
