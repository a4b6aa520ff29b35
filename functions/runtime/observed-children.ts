// What a reconcile knows of its parent's children, without listing anything: their keys come with
// the event (the bridge's keys-only index of the children that carry crdfn's label and a
// controller reference to the parent), and the children of kinds marked `observe` are read by
// name. Keys may be a moment old: a child created a moment ago may be missing (it is applied
// again, which changes nothing, and its appearance announces the parent once more, so a prune
// it needs comes one reconcile later), a child gone a moment ago may still be listed (its read
// or delete answers 404). An event without keys (a parent with more children than an event can
// carry, or a v1 event) is answered by one labelled LIST per owned kind, paginated, which gives
// the same keys (and the observed kinds' bodies, read by no one else).
import { apiVersionOf, type ObservedChildren, type ObservedObject, type Operator } from "../../core/operator.ts";
import { PARENT_UID_LABEL, type ChildKey } from "../../core/event.ts";
import { appliedHashOf } from "../../core/reconciled.ts";
import { ApiError } from "../../clients/kube-http.ts";
import type { KubeObject, ResourceRef } from "./kube-api.ts";
import type { Step } from "./step.ts";

type Owned = Operator["owns"][number];

/** The children's keys by owned kind, then by "namespace/name"; undefined when the event carries none (a v1 event). */
export type ChildKeys = Map<Owned, Map<string, ChildKey>> | undefined;

/** Observed children as read, by owned kind, then by "namespace/name". */
export type ObservedByKind = Map<Owned, Map<string, KubeObject>>;

export const childKey = (namespace: string | undefined, name: string): string => `${namespace ?? ""}/${name}`;

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
  return keys !== undefined ? { keys } : listChildren(step, parent);
}

/**
 * Every child of every owned kind that carries this parent's label and controller reference —
 * what the bridge's index would have named. The applied hash is the bridge's too: only while the
 * function's own apply wrote the child's content last.
 */
export async function listChildren(step: Step, parent: KubeObject): Promise<Required<KnownChildren>> {
  const uid = parent.metadata.uid ?? "";
  const keys: NonNullable<ChildKeys> = new Map();
  const listed: ObservedByKind = new Map();
  await Promise.all(
    step.operator.owns.map(async (owned) => {
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
        const key = childKey(m.namespace, m.name);
        byKey.set(key, { apiVersion, kind: owned.kind, ...(m.namespace ? { namespace: m.namespace } : {}), name: m.name, uid: m.uid, resourceVersion: m.resourceVersion, ...(hash === undefined ? {} : { appliedHash: hash }) });
        if (owned.observe) bodies.set(key, { ...o, apiVersion, kind: owned.kind });
      }
      keys.set(owned, byKey);
      if (owned.observe) listed.set(owned, bodies);
    }),
  );
  return { keys, listed };
}

/** The event's children, grouped by the kind the operator owns (keys of kinds it does not own are ignored). */
export function childKeysOf(step: Step): ChildKeys {
  const children = step.event.children;
  if (children === undefined) return undefined;
  const keys: NonNullable<ChildKeys> = new Map(step.operator.owns.map((o) => [o, new Map<string, ChildKey>()]));
  for (const c of children) {
    const owned = step.operator.owns.find((o) => o.kind === c.kind && apiVersionOf(o.group, o.version) === c.apiVersion);
    keys.get(owned!)?.set(childKey(c.namespace, c.name), c);
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
