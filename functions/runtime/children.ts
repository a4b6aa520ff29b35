// A parent's children: who they are (the owned kind declared, the REST location, the key the
// event names them by), listing them by the parent label where the event cannot name them, and
// writing what reconcile asked for. Owned children: checked (declared kind, parent's namespace,
// not someone else's object), applied only when they differ from what was last applied (fenced by
// the parent's generation, core/fence.ts), and the ones this parent applied before and no longer
// returns are pruned, from a view proven current. Shared objects: a field manager per parent, so
// server-side apply merges the contributions. Reading them before reconcile is reads.ts.
import { PermanentError } from "../../core/errors.ts";
import { apiVersionOf, type DesiredObject, type ObservedChildren, type Operator, type ReconcileResult } from "../../core/operator.ts";
import { createHash } from "node:crypto";
import { canonicalJson } from "../../core/canonical-json.ts";
import { ApiError } from "../../clients/kube-http.ts";
import type { KubeApi, KubeObject, ResourceRef } from "./kube-api.ts";
import { appliedHashOf, childMarkOf, childToken, type ChildMark } from "../../core/reconciled.ts";
import { isOtherIncarnationRefusal, isOwnershipRefusal, refusedChildUid } from "../../core/ownership.ts";
import { APPLIED_HASH_ANNOTATION, PARENT_GENERATION_ANNOTATION, PARENT_UID_LABEL, type ChildKey } from "../../core/event.ts";
import { fenceOf, isStaleRefusal, mustRaiseFence } from "../../core/fence.ts";
import { keyOf } from "../../core/resource-path.ts";
import type { EventContext } from "./event-context.ts";
import { StaleView } from "./outcome.ts";

type Owned = Operator["owns"][number];

/** The children's keys by owned kind, then by "namespace/name"; undefined when the event carries none (a v1 event). */
export type ChildKeys = Map<Owned, Map<string, ChildKey>> | undefined;

/** Observed children as read, by owned kind, then by "namespace/name". */
export type ObservedByKind = Map<Owned, Map<string, KubeObject>>;

export function childRef(owned: Owned, namespace: string | undefined, name: string): ResourceRef & { name: string } {
  return { group: owned.group, version: owned.version, plural: owned.plural, name, ...(owned.namespaced && namespace ? { namespace } : {}) };
}

/** The children's keys, and their bodies when they were listed (observed kinds only). */
export interface KnownChildren {
  keys: ChildKeys;
  listed?: ObservedByKind;
}

/** What a reconcile read of its children before reconcile ran (reads.ts). */
export interface ChildrenRead {
  known: KnownChildren;
  observed: ObservedByKind;
  /** What reconcile sees as `ctx.children`. */
  view: ObservedChildren;
}

// From a child's apiVersion and kind to the owned kind the operator declared (and its REST location).
export type OwnedKindOf<O extends Operator<unknown>> = O["owns"][number];

export function ownedKind(operator: Operator<unknown>, apiVersion: string, kind: string): OwnedKindOf<Operator<unknown>> | undefined {
  return operator.owns.find((o) => apiVersionOf(o.group, o.version) === apiVersion && o.kind === kind);
}

/** undefined when the kind is not declared in `owns`. */
export function ownedRef(operator: Operator<unknown>, apiVersion: string, kind: string, namespace: string | undefined, name?: string): ResourceRef | undefined {
  const owned = ownedKind(operator, apiVersion, kind);
  if (!owned) return undefined;
  return {
    group: owned.group,
    version: owned.version,
    plural: owned.plural,
    ...(name ? { name } : {}),
    ...(owned.namespaced && namespace ? { namespace } : {}),
  };
}

/** Each parent's own manager on a shared object, so server-side apply merges the contributions. */
export function sharedFieldManager(ctx: EventContext, parent: KubeObject): string {
  return `${ctx.operator.fieldManager}-${parent.metadata.uid ?? ""}`;
}

/**
 * A hash of the child as applied, under crdfn.io/applied-hash (the bridge reads it by that name):
 * a change to what reconcile wants means a new apply.
 */
function appliedHash(body: KubeObject): string {
  return createHash("sha256").update(canonicalJson(body)).digest("hex").slice(0, 32);
}

interface OwnerReference {
  apiVersion?: string;
  kind?: string;
  name?: string;
  uid?: string;
  controller?: boolean;
}

/** The object's controller owner reference, if any. */
function controllerRef(object: KubeObject): OwnerReference | undefined {
  return ((object.metadata.ownerReferences as OwnerReference[] | undefined) ?? []).find((r) => r.controller);
}

/**
 * Does `observed` already hold everything `desired` sets? Maps may hold more (defaults, other
 * managers); lists must match item by item. Together with the applied hash (which catches fields
 * reconcile dropped) this decides that an apply would change nothing.
 */
function holds(observed: unknown, desired: unknown): boolean {
  if (Array.isArray(desired)) return Array.isArray(observed) && observed.length === desired.length && desired.every((d, i) => holds(observed[i], d));
  if (desired !== null && typeof desired === "object") {
    if (observed === null || typeof observed !== "object" || Array.isArray(observed)) return false;
    return Object.entries(desired as Record<string, unknown>).every(([k, v]) => v === undefined || holds((observed as Record<string, unknown>)[k], v));
  }
  return observed === desired;
}

interface PlannedChild {
  ref: ResourceRef & { name: string };
  body: KubeObject;
  owned: NonNullable<ReturnType<typeof ownedKind>>;
  key: string;
}

/**
 * Applies the children reconcile asked for (pruning the ones it no longer asks for is
 * `pruneChildren`, once the view is proven current). What the event's keys say is this parent's
 * and was last applied as wanted is left alone, unless its fence must be raised (core/fence.ts);
 * a child of an observed kind the keys do not name is read first, and written only if this parent
 * controls it (or it is an orphan to adopt); any other child is applied, and the API server
 * refuses a write onto an object another controls (the generated admission policy; two controller
 * references), or one from an older generation of the parent than the child's fence.
 * The keys it goes by are the event's, or listed afresh when they are stale (freshKeys). Resolves
 * with what it asked for (what pruning spares), the children it left, as the bridge's index will
 * know them (core/reconciled.ts), and the keys it went by (what pruning looks at).
 */
export async function writeChildren(
  ctx: EventContext,
  parent: KubeObject,
  result: ReconcileResult,
  read: ChildrenRead,
): Promise<{ wanted: WantedChildren; left: ChildMark[]; keys: ChildKeys }> {
  const keys = await freshKeys(ctx, parent, read.known, result.children ?? []);
  const { observed } = read;
  const planned = (result.children ?? []).map((c) => planChild(ctx, parent, c));
  // Every check before any write: a refused child leaves the others as they were.
  const known = await Promise.all(planned.map((p) => (keys?.get(p.owned)?.has(p.key) ? Promise.resolve(undefined) : unknownChild(ctx, p, observed))));
  const verdicts = planned.map((p, i) => checkOwnership(ctx, parent, p, known[i]));
  const generation = parent.metadata.generation;
  // A fence above the generation acted on is never left alone: either the view is stale (the
  // apply is refused, and the parent read again) or the fence was raised past anything this
  // parent wrote (applyChild reports it). Skipped, it would read as Ready.
  const raise = (fence: number | undefined) =>
    mustRaiseFence(ctx.event.generation, generation, fence) || (fence !== undefined && generation !== undefined && fence > generation);
  const left: ChildMark[] = [];
  const fieldManager = ctx.operator.fieldManager;
  for (const [i, p] of planned.entries()) {
    const key = keys?.get(p.owned)?.get(p.key);
    // The fence as last known: the key's, or the observed child's when it was read (both only lag behind).
    const fence = highest(key?.parentGeneration, fenceOf(observed.get(p.owned)?.get(p.key)));
    if (key !== undefined && key.appliedHash !== undefined && key.appliedHash === hashOf(p.body) && !raise(fence)) {
      left.push({ uid: key.uid, token: key.appliedHash });
      continue;
    }
    const there = known[i];
    if (there && verdicts[i] === "take-over") await takeOver(ctx, parent, p, there.metadata.uid ?? "");
    else if (there && hashOf(there) === hashOf(p.body) && holds(there, p.body) && !raise(fenceOf(there))) {
      left.push(childMarkOf(there, fieldManager));
      continue;
    }
    left.push(childMarkOf(await applyChild(ctx, parent, p, fence), fieldManager));
  }
  for (const shared of result.shared ?? []) await applyShared(ctx, shared, parent);
  const wanted = new Set(planned.map((p) => `${p.owned.kind}|${p.key}`));
  return { wanted, left: [...left, ...keptUnwanted(keys, wanted)], keys };
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
    for (const [key, child] of children)
      if (!wanted.has(`${owned.kind}|${key}`)) kept.push({ uid: child.uid, token: childToken(child.appliedHash, "unknown") });
  }
  return kept;
}

/** The children reconcile asked for, as "kind|namespace/name": what pruning spares. */
export type WantedChildren = ReadonlySet<string>;

const highest = (a: number | undefined, b: number | undefined): number | undefined => (a === undefined ? b : b === undefined ? a : Math.max(a, b));

/** A child the keys do not name: of an observed kind, as it is there (read by name); of another kind, not read. */
async function unknownChild(ctx: EventContext, p: PlannedChild, observed: ObservedByKind): Promise<KubeObject | undefined> {
  if (!p.owned.observe) return undefined;
  return observed.get(p.owned)?.get(p.key) ?? (await readByName(ctx, p.owned, p.ref.namespace, p.ref.name));
}

/**
 * Applies a child fenced with the parent generation it was computed from (outside the applied
 * hash: an unchanged child is still skipped). A refusal of the write because another controls the
 * object becomes ChildConflict, naming it. The fence's refusal, and the refusal to move a child
 * between two objects of the parent's name, are judged by a read of the parent (judgeRefusal);
 * a child of an earlier object of this name is then deleted, and applied again: created.
 * `fence`: the child's fence as last known, for the words of a report.
 */
async function applyChild(ctx: EventContext, parent: KubeObject, p: PlannedChild, fence: number | undefined): Promise<KubeObject> {
  const generation = parent.metadata.generation;
  const annotations = {
    ...(p.body.metadata.annotations as Record<string, string>),
    ...(generation === undefined ? {} : { [PARENT_GENERATION_ANNOTATION]: String(generation) }),
  };
  const apply = () => ctx.api.apply(p.ref, { ...p.body, metadata: { ...p.body.metadata, annotations } }, ctx.operator.fieldManager);
  try {
    return await apply();
  } catch (e) {
    if (e instanceof ApiError && isOwnershipRefusal(e)) throw new PermanentError(`${childName(p)}: ${e.message}`, "ChildConflict");
    if (!(e instanceof ApiError && (isStaleRefusal(e) || isOtherIncarnationRefusal(e)))) throw e;
    const live = await ctx.api.get(ctx.ref);
    await takeOver(ctx, parent, p, judgeRefusal(parent, p, e, fence, live, ctx.operator.resource.kind), live);
    return await apply();
  }
}

const childName = (p: PlannedChild): string => `${p.owned.kind} ${p.ref.namespace ? `${p.ref.namespace}/` : ""}${p.ref.name}`;

/**
 * The API server refused a child write of this parent's: its fence is higher, or another object of
 * the parent's name controls it. Which of the view and the world is wrong, only a read of the
 * parent (`live`) tells: another uid or a newer generation, and the view was stale (StaleView:
 * read again and recompute; an earlier incarnation's event ends there, runtime.ts). Otherwise the
 * view is the live parent, and the refusal is the child's: a fence above the live generation was
 * raised past anything this parent wrote (its generations only grow), reported as FenceAhead
 * until repaired; a child of another object of this name is an earlier incarnation's (a name
 * holds one object at a time): its uid is returned, to be taken over.
 */
function judgeRefusal(parent: KubeObject, p: PlannedChild, refusal: ApiError, fence: number | undefined, live: KubeObject | undefined, kind: string): string {
  const generation = parent.metadata.generation ?? 0;
  if (!live || live.metadata.uid !== parent.metadata.uid || (live.metadata.generation ?? 0) > generation)
    throw new StaleView(
      `${childName(p)}: ${refusal.message}; the view acted on (uid ${parent.metadata.uid ?? "?"}, generation ${generation}) is not the live object`,
    );
  const self = `${kind.toLowerCase()}/${parent.metadata.name}${parent.metadata.namespace ? ` -n ${parent.metadata.namespace}` : ""}`;
  const earlier = isOtherIncarnationRefusal(refusal) ? refusedChildUid(refusal.message) : undefined;
  if (earlier !== undefined) return earlier;
  if (isStaleRefusal(refusal))
    throw new PermanentError(
      `${childName(p)} carries ${PARENT_GENERATION_ANNOTATION} ${fence ?? "(unknown)"}, above this ${kind}'s generation ${generation}: ` +
        `no write of this ${kind} set it (raised by hand or by a tool); run \`crdfn repair ${self}\` to lower it`,
      "FenceAhead",
    );
  throw new PermanentError(`${childName(p)}: ${refusal.message}`, "ChildConflict");
}

/**
 * A child controlled by an earlier object of the parent's name, deleted (uid precondition: exactly
 * the object seen or refused) so that this parent's apply creates its own: a controller is never
 * changed by a write (core/ownership.ts). Only for the live parent: the "earlier" object may be
 * the live one and this view the earlier (an old event's carried body), so the parent is read
 * first where the caller has not just read it.
 */
async function takeOver(ctx: EventContext, parent: KubeObject, p: PlannedChild, childUid: string, live?: KubeObject): Promise<void> {
  const current = live ?? (await ctx.api.get(ctx.ref));
  if (current?.metadata.uid !== parent.metadata.uid)
    throw new StaleView(`${childName(p)}: controlled by another object of this name; this view (uid ${parent.metadata.uid ?? "?"}) is not the live object`);
  ctx.log.info({ child: childName(p), childUid }, "taking over the child of an earlier object of this name: deleting it, then applying");
  try {
    await ctx.api.delete(p.ref, { uid: childUid });
  } catch (e) {
    // Gone already (its garbage collection came first): the apply creates it.
    if (!(e instanceof ApiError && e.code === 404)) throw e;
  }
}

const hashOf = (o: KubeObject): string | undefined => (o.metadata.annotations as Record<string, string> | undefined)?.[APPLIED_HASH_ANNOTATION];

function planChild(ctx: EventContext, parent: KubeObject, desired: DesiredObject): PlannedChild {
  const { operator } = ctx;
  const owned = ownedKind(operator, desired.apiVersion, desired.kind);
  const what = `${desired.kind} ${desired.metadata.name}`;
  if (!owned) throw new PermanentError(`${what}: ${desired.kind} (${desired.apiVersion}) is not declared in owns`, "UndeclaredKind");
  const parentNamespace = parent.metadata.namespace;
  const namespaced = operator.resource.scope === "Namespaced";
  // The garbage collector only honours owner references within one namespace (or from a
  // cluster-scoped owner): anything else would be an orphan that reads as Ready.
  if (namespaced && !owned.namespaced)
    throw new PermanentError(`${what}: a namespaced ${operator.resource.kind} cannot own a cluster-scoped ${desired.kind}`, "ChildInOtherNamespace");
  if (namespaced && desired.metadata.namespace && desired.metadata.namespace !== parentNamespace) {
    throw new PermanentError(
      `${what}: namespace "${desired.metadata.namespace}" is not the parent's namespace "${parentNamespace ?? ""}"`,
      "ChildInOtherNamespace",
    );
  }
  const namespace = owned.namespaced ? (desired.metadata.namespace ?? parentNamespace) : undefined;
  if (owned.namespaced && !namespace) throw new PermanentError(`${what}: a child of a cluster-scoped parent needs metadata.namespace`, "ChildWithoutNamespace");
  const ref = { ...(ownedRef(operator, desired.apiVersion, desired.kind, namespace) as ResourceRef), name: desired.metadata.name };
  const ownerReference = {
    apiVersion: operator.apiVersion,
    kind: operator.resource.kind,
    name: parent.metadata.name,
    uid: parent.metadata.uid ?? "",
    controller: true,
    blockOwnerDeletion: true,
  };
  const unhashed: KubeObject = {
    ...desired,
    metadata: {
      ...desired.metadata,
      ...(namespace ? { namespace } : {}),
      labels: { ...desired.metadata.labels, [PARENT_UID_LABEL]: parent.metadata.uid ?? "" },
      ownerReferences: [ownerReference],
    },
  };
  const body = {
    ...unhashed,
    metadata: { ...unhashed.metadata, annotations: { ...desired.metadata.annotations, [APPLIED_HASH_ANNOTATION]: appliedHash(unhashed) } },
  };
  return { ref, body, owned, key: keyOf(namespace, desired.metadata.name) };
}

/**
 * Never apply onto an object this parent does not control: like controller-runtime, no stealing.
 * "take-over": it is controlled by an earlier object of the parent's name (takeOver).
 */
function checkOwnership(ctx: EventContext, parent: KubeObject, p: PlannedChild, there: KubeObject | undefined): "write" | "take-over" {
  if (!there) return "write";
  const ref = controllerRef(there);
  const controller = ref?.uid;
  if (controller === parent.metadata.uid) return "write";
  if (ref && earlierObjectOfThisName(ctx, parent, ref)) return "take-over";
  if (controller === undefined && p.owned.adopt) return "write";
  const where = childName(p);
  const why = controller
    ? `is controlled by another object (uid ${controller})`
    : `exists and is not controlled by this ${ctx.operator.resource.kind}; delete it, rename the child, or set adopt: true on ${p.owned.kind} in owns to adopt orphans`;
  throw new PermanentError(`${where} ${why}`, "ChildConflict");
}

/**
 * A controller reference to this parent's kind and name with another uid names another object of
 * this name: an earlier one, deleted since, if this view is the live parent (takeOver checks):
 * its child only waits for the garbage collector. A re-created parent takes it over at once
 * instead of reporting ChildConflict until the collector gets round to it.
 */
function earlierObjectOfThisName(ctx: EventContext, parent: KubeObject, ref: OwnerReference): boolean {
  const { apiVersion, resource } = ctx.operator;
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
export async function pruneChildren(ctx: EventContext, view: KubeObject, keys: ChildKeys, wanted: WantedChildren): Promise<void> {
  if (keys === undefined) return;
  const unwanted = [...keys]
    .filter(([owned]) => owned.prune)
    .flatMap(([owned, children]) => [...children].filter(([key]) => !wanted.has(`${owned.kind}|${key}`)).map(([, child]) => ({ owned, child })));
  if (unwanted.length === 0) return;
  const current = await ctx.api.get(ctx.ref);
  if (current?.metadata.uid !== view.metadata.uid || current?.metadata.generation !== view.metadata.generation) {
    ctx.log.debug({ acted: view.metadata.generation, current: current?.metadata.generation }, "not pruning from a view that is no longer current");
    return;
  }
  for (const { owned, child } of unwanted) {
    try {
      await ctx.api.delete(childRef(owned, child.namespace, child.name), { uid: child.uid });
    } catch (e) {
      if (!(e instanceof ApiError && e.code === 409)) throw e;
    }
  }
}

async function applyShared(ctx: EventContext, desired: DesiredObject, parent: KubeObject): Promise<void> {
  const target = ownedRef(ctx.operator, desired.apiVersion, desired.kind, desired.metadata.namespace ?? parent.metadata.namespace, desired.metadata.name);
  if (!target)
    throw new PermanentError(`${desired.kind} ${desired.metadata.name}: ${desired.kind} (${desired.apiVersion}) is not declared in owns`, "UndeclaredKind");
  const body: KubeObject = { ...desired, metadata: { ...desired.metadata, ...(target.namespace ? { namespace: target.namespace } : {}) } };
  await ctx.api.apply(target, body, sharedFieldManager(ctx, parent));
}

/** The objects of an owned kind that carry the parent's uid label, from where its children live (a labelled LIST). */
export function listOwnedBy(api: KubeApi, owned: Owned, parent: KubeObject): Promise<KubeObject[]> {
  const ref = {
    group: owned.group,
    version: owned.version,
    plural: owned.plural,
    ...(owned.namespaced && parent.metadata.namespace ? { namespace: parent.metadata.namespace } : {}),
  };
  return api.list(ref, `${PARENT_UID_LABEL}=${parent.metadata.uid ?? ""}`);
}

/**
 * The key the bridge's index holds for a listed object of an owned kind: undefined unless its
 * controller reference names the parent. The applied hash only while the function's own apply
 * wrote its content last; the fence as the child's annotation records it.
 */
export function childKeyOf(owned: Owned, o: KubeObject, parentUid: string, fieldManager: string): ChildKey | undefined {
  const m = o.metadata;
  const controller = (m.ownerReferences as Array<{ uid?: string; controller?: boolean }> | undefined)?.find((r) => r.controller === true);
  if (controller?.uid !== parentUid || !m.uid || !m.resourceVersion) return undefined;
  const hash = appliedHashOf(o, fieldManager);
  const fence = fenceOf(o);
  return {
    apiVersion: apiVersionOf(owned.group, owned.version),
    kind: owned.kind,
    ...(m.namespace ? { namespace: m.namespace } : {}),
    name: m.name,
    uid: m.uid,
    resourceVersion: m.resourceVersion,
    ...(hash === undefined ? {} : { appliedHash: hash }),
    ...(fence === undefined ? {} : { parentGeneration: fence }),
  };
}

/**
 * Every child of every owned kind marked `list` that carries this parent's label and controller
 * reference — what the bridge's index would have named. The applied hash is the bridge's too:
 * only while the function's own apply wrote the child's content last. A kind not marked `list` is
 * left out (unknown).
 */
export async function listChildren(ctx: EventContext, parent: KubeObject): Promise<{ keys: NonNullable<ChildKeys>; listed: ObservedByKind }> {
  const uid = parent.metadata.uid ?? "";
  const keys: NonNullable<ChildKeys> = new Map();
  const listed: ObservedByKind = new Map();
  await Promise.all(
    ctx.operator.owns
      .filter((o) => o.list)
      .map(async (owned) => {
        const items = await listOwnedBy(ctx.api, owned, parent);
        const byKey = new Map<string, ChildKey>();
        const bodies = new Map<string, KubeObject>();
        for (const o of items) {
          const child = childKeyOf(owned, o, uid, ctx.operator.fieldManager);
          if (child === undefined) continue;
          const key = keyOf(child.namespace, child.name);
          byKey.set(key, child);
          if (owned.observe) bodies.set(key, { ...o, apiVersion: child.apiVersion, kind: owned.kind });
        }
        keys.set(owned, byKey);
        if (owned.observe) listed.set(owned, bodies);
      }),
  );
  // Observed kinds not listed are read by name, as the keys would have named them: none known.
  for (const owned of ctx.operator.owns) if (owned.observe && !owned.list) listed.set(owned, new Map());
  return { keys, listed };
}

/**
 * Wanted children of a listed kind that the keys do not name, past which a LIST is cheaper than
 * applying each again: a snapshot of keys taken while a parent's thousands of children were being
 * created, queued behind that long reconcile, names few of them.
 */
export const STALE_KEYS_MISSING = 50;

/**
 * The keys to write children by: the event's, unless they miss more than STALE_KEYS_MISSING of
 * the children reconcile wants of a kind marked `list`; then listed afresh (what a reapply of each
 * would cost in thousands of requests, a LIST costs in one per 500).
 */
async function freshKeys(ctx: EventContext, parent: KubeObject, known: KnownChildren, wanted: readonly DesiredObject[]): Promise<ChildKeys> {
  const named = known.keys;
  if (known.listed !== undefined || named === undefined) return named;
  const stale = ctx.operator.owns.some((owned) => {
    if (!owned.list) return false;
    const ofKind = named.get(owned);
    const apiVersion = apiVersionOf(owned.group, owned.version);
    let missing = 0;
    for (const c of wanted)
      if (
        c.kind === owned.kind &&
        c.apiVersion === apiVersion &&
        !ofKind?.has(keyOf(owned.namespaced ? (c.metadata.namespace ?? parent.metadata.namespace) : undefined, c.metadata.name))
      )
        missing++;
    return missing > STALE_KEYS_MISSING;
  });
  if (!stale) return named;
  const keys = (await listChildren(ctx, parent)).keys;
  // The kinds not listed keep what the event named.
  for (const [owned, ofKind] of named) if (!owned.list) keys.set(owned, ofKind);
  return keys;
}

/** A child of an observed kind the event does not name, read by name (undefined when there is none). */
async function readByName(ctx: EventContext, owned: Owned, namespace: string | undefined, name: string): Promise<KubeObject | undefined> {
  try {
    return await ctx.api.get(childRef(owned, namespace, name));
  } catch (e) {
    if (e instanceof ApiError && e.code === 404) return undefined;
    throw e;
  }
}
