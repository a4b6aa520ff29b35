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
import { apiVersionOf, type ObservedChildren, type ObservedObject, type Operator } from "../../core/operator.ts";
import type { ChildKey } from "../../core/event.ts";
import { childKey, childRef, listChildren, type ChildKeys, type ChildrenRead, type KnownChildren, type ObservedByKind } from "./children.ts";
import type { KubeObject } from "./kube-api.ts";
import type { ReconcileContext } from "./reconcile-context.ts";

/** The children's keys, the observed ones read, and what reconcile sees of them as `ctx.children`. */
export async function readChildren(ctx: ReconcileContext, parent: KubeObject): Promise<ChildrenRead> {
  const known = await knownChildren(ctx, parent);
  const observed = await readObserved(ctx, known);
  return { known, observed, view: observedChildren(ctx.operator, observed) };
}

/** The children's keys from the event, or, when it carries none, listed by the parent label. */
async function knownChildren(ctx: ReconcileContext, parent: KubeObject): Promise<KnownChildren> {
  const keys = childKeysOf(ctx);
  if (keys !== undefined) return { keys };
  const unlisted = ctx.operator.owns.filter((o) => !o.list).map((o) => o.kind);
  if (unlisted.length > 0) ctx.log.warn({ kinds: unlisted }, `the event names no children (more than an event carries, or a v1 event) and ${unlisted.join(", ")} ${unlisted.length === 1 ? "is" : "are"} not marked list: true in owns: every such child wanted is applied, none pruned`);
  return listChildren(ctx, parent);
}

/** The event's children, grouped by the kind the operator owns (keys of kinds it does not own are ignored). */
function childKeysOf(ctx: ReconcileContext): ChildKeys {
  const children = ctx.event.children;
  if (children === undefined) return undefined;
  const keys: NonNullable<ChildKeys> = new Map(ctx.operator.owns.map((o) => [o, new Map<string, ChildKey>()]));
  for (const c of children) {
    const owned = ctx.operator.owns.find((o) => o.kind === c.kind && apiVersionOf(o.group, o.version) === c.apiVersion);
    keys.get(owned!)?.set(childKey(c.namespace, c.name), c);
  }
  return keys;
}

/**
 * Reads the observed children by name, side by side: from the API server's watch cache, no
 * older than the version the bridge saw. One that is gone since is left out.
 */
async function readObserved(ctx: ReconcileContext, { keys, listed }: KnownChildren): Promise<ObservedByKind> {
  if (listed !== undefined) return listed;
  const observed: ObservedByKind = new Map();
  const reads: Array<Promise<void>> = [];
  for (const owned of ctx.operator.owns) {
    if (!owned.observe) continue;
    const byKey = new Map<string, KubeObject>();
    observed.set(owned, byKey);
    for (const [key, c] of keys?.get(owned) ?? []) {
      reads.push(
        ctx.api.get(childRef(owned, c.namespace, c.name), { notOlderThan: c.resourceVersion }).then((o) => {
          if (o !== undefined && o.metadata.uid === c.uid) byKey.set(key, { ...o, apiVersion: apiVersionOf(owned.group, owned.version), kind: owned.kind });
        }),
      );
    }
  }
  await Promise.all(reads);
  return observed;
}

/** What reconcile sees as `ctx.children` (crdfn/testing builds it too). */
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
