// What a reconcile knows of its parent's children, without listing anything: their keys come with
// the event (the bridge's keys-only index of the children that carry crdfn's label and a
// controller reference to the parent), and the children of kinds marked `observe` are read by
// name. Keys may be a moment old: a child created a moment ago may be missing (it is applied
// again, which changes nothing, and its appearance announces the parent once more, so a prune
// it needs comes one reconcile later), a child gone a moment ago may still be listed (its read
// or delete answers 404).
import { apiVersionOf, type ObservedChildren, type ObservedObject, type Operator } from "../../core/operator.ts";
import type { ChildKey } from "../../core/event.ts";
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
export async function readObserved(step: Step, keys: ChildKeys): Promise<ObservedByKind> {
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
