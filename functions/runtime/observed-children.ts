// What a reconcile knows of its parent's children, without listing anything: their keys come with
// the event (the bridge's keys-only index of the children that carry crdfn's label and a
// controller reference to the parent), and the children of kinds marked `observe` are read by
// name. Keys may be a moment old: a child created a moment ago may be missing (it is applied
// again, which changes nothing, and its appearance announces the parent once more, so a prune
// it needs comes one reconcile later), a child gone a moment ago may still be listed (its read
// or delete answers 404). An event without keys (a parent with more children than an event can
// carry, or a v1 event) is answered by one labelled LIST per owned kind marked `list` (the
// function may list only those), paginated, which gives the same keys (and the observed kinds'
// bodies); the children of any other kind are then unknown: all applied, none pruned.
import { apiVersionOf, type DesiredObject, type ObservedChildren, type ObservedObject, type Operator } from "../../core/operator.ts";
import { PARENT_UID_LABEL, type ChildKey } from "../../core/event.ts";
import { appliedHashOf } from "../../core/reconciled.ts";
import { keyOf } from "../../core/resource-path.ts";
import { ApiError } from "../../clients/kube-http.ts";
import type { KubeObject, ResourceRef } from "./kube-api.ts";
import type { Step } from "./step.ts";

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

/** The children's keys from the event, or, when it carries none, listed by the parent label. */
export async function knownChildren(step: Step, parent: KubeObject): Promise<KnownChildren> {
  const keys = childKeysOf(step);
  if (keys !== undefined) return { keys };
  const unlisted = step.operator.owns.filter((o) => !o.list).map((o) => o.kind);
  if (unlisted.length > 0) step.log.warn({ kinds: unlisted }, `the event names no children (more than an event carries, or a v1 event) and ${unlisted.join(", ")} ${unlisted.length === 1 ? "is" : "are"} not marked list: true in owns: every such child wanted is applied, none pruned`);
  return listChildren(step, parent);
}

/**
 * Every child of every owned kind marked `list` that carries this parent's label and controller
 * reference — what the bridge's index would have named. The applied hash is the bridge's too:
 * only while the function's own apply wrote the child's content last. A kind not marked `list` is
 * left out (unknown).
 */
export async function listChildren(step: Step, parent: KubeObject): Promise<{ keys: NonNullable<ChildKeys>; listed: ObservedByKind }> {
  const uid = parent.metadata.uid ?? "";
  const keys: NonNullable<ChildKeys> = new Map();
  const listed: ObservedByKind = new Map();
  await Promise.all(
    step.operator.owns.filter((o) => o.list).map(async (owned) => {
      const ref = { group: owned.group, version: owned.version, plural: owned.plural, ...(owned.namespaced && parent.metadata.namespace ? { namespace: parent.metadata.namespace } : {}) };
      const items = await step.api.list(ref, `${PARENT_UID_LABEL}=${uid}`);
      const apiVersion = apiVersionOf(owned.group, owned.version);
      const byKey = new Map<string, ChildKey>();
      const bodies = new Map<string, KubeObject>();
      for (const o of items) {
        const m = o.metadata;
        const controller = (m.ownerReferences as Array<{ uid?: string; controller?: boolean }> | undefined)?.find((r) => r.controller === true);
        if (controller?.uid !== uid || m.uid === undefined || m.resourceVersion === undefined) continue;
        const hash = appliedHashOf(o, step.operator.fieldManager);
        const key = keyOf(m.namespace, m.name);
        byKey.set(key, { apiVersion, kind: owned.kind, ...(m.namespace ? { namespace: m.namespace } : {}), name: m.name, uid: m.uid, resourceVersion: m.resourceVersion, ...(hash === undefined ? {} : { appliedHash: hash }) });
        if (owned.observe) bodies.set(key, { ...o, apiVersion, kind: owned.kind });
      }
      keys.set(owned, byKey);
      if (owned.observe) listed.set(owned, bodies);
    }),
  );
  // Observed kinds not listed are read by name, as the keys would have named them: none known.
  for (const owned of step.operator.owns) if (owned.observe && !owned.list) listed.set(owned, new Map());
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
export async function freshKeys(step: Step, parent: KubeObject, known: KnownChildren, wanted: readonly DesiredObject[]): Promise<ChildKeys> {
  const named = known.keys;
  if (known.listed !== undefined || named === undefined) return named;
  const stale = step.operator.owns.some((owned) => {
    if (!owned.list) return false;
    const ofKind = named.get(owned);
    const apiVersion = apiVersionOf(owned.group, owned.version);
    let missing = 0;
    for (const c of wanted) if (c.kind === owned.kind && c.apiVersion === apiVersion && !ofKind?.has(keyOf(owned.namespaced ? (c.metadata.namespace ?? parent.metadata.namespace) : undefined, c.metadata.name))) missing++;
    return missing > STALE_KEYS_MISSING;
  });
  if (!stale) return named;
  const keys = (await listChildren(step, parent)).keys;
  // The kinds not listed keep what the event named.
  for (const [owned, ofKind] of named) if (!owned.list) keys.set(owned, ofKind);
  return keys;
}

/** The event's children, grouped by the kind the operator owns (keys of kinds it does not own are ignored). */
export function childKeysOf(step: Step): ChildKeys {
  const children = step.event.children;
  if (children === undefined) return undefined;
  const keys: NonNullable<ChildKeys> = new Map(step.operator.owns.map((o) => [o, new Map<string, ChildKey>()]));
  for (const c of children) {
    const owned = step.operator.owns.find((o) => o.kind === c.kind && apiVersionOf(o.group, o.version) === c.apiVersion);
    keys.get(owned!)?.set(keyOf(c.namespace, c.name), c);
  }
  return keys;
}

/**
 * Reads the observed children by name, side by side: from the API server's watch cache, no
 * older than the version the bridge saw. One that is gone since is left out.
 */
export async function readObserved(step: Step, { keys, listed }: KnownChildren): Promise<ObservedByKind> {
  if (listed !== undefined) return listed;
  const observed: ObservedByKind = new Map();
  const reads: Array<Promise<void>> = [];
  for (const owned of step.operator.owns) {
    if (!owned.observe) continue;
    const byKey = new Map<string, KubeObject>();
    observed.set(owned, byKey);
    for (const [key, c] of keys?.get(owned) ?? []) {
      reads.push(
        step.api.get(childRef(owned, c.namespace, c.name), { notOlderThan: c.resourceVersion }).then((o) => {
          if (o !== undefined && o.metadata.uid === c.uid) byKey.set(key, { ...o, apiVersion: apiVersionOf(owned.group, owned.version), kind: owned.kind });
        }),
      );
    }
  }
  await Promise.all(reads);
  return observed;
}

/** A child of an observed kind the event does not name, read by name (undefined when there is none). */
export async function readByName(step: Step, owned: Owned, namespace: string | undefined, name: string): Promise<KubeObject | undefined> {
  try {
    return await step.api.get(childRef(owned, namespace, name));
  } catch (e) {
    if (e instanceof ApiError && e.code === 404) return undefined;
    throw e;
  }
}

/** What reconcile sees as `ctx.children`. */
export function observedChildren(operator: Operator, observed: ObservedByKind): ObservedChildren {
  return {
    of<T = ObservedObject>(kind: string, apiVersion?: string): Readonly<Record<string, T>> {
      const owned = operator.owns.find((o) => o.kind === kind && (!apiVersion || apiVersionOf(o.group, o.version) === apiVersion));
      if (!owned?.observe) throw new Error(`ctx.children.of("${kind}"): ${kind} is not an observed kind; declare it in owns with observe: true`);
      const children = [...(observed.get(owned)?.values() ?? [])];
      return Object.freeze(Object.fromEntries(children.map((c) => [c.metadata.name, c as unknown as T])));
    },
  };
}
