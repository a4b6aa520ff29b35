// Reading the children a parent controls: ONE labelled LIST per owned kind that is observed or
// pruned (cheaper than a GET per child as soon as a kind has a child, and it finds the children
// reconcile no longer returns, which GETs of today's names cannot).
import { ownChangeOnly } from "../../core/event.ts";
import { apiVersionOf, type ObservedChildren, type ObservedObject, type Operator } from "../../core/operator.ts";
import { controllerUid, PARENT_UID_LABEL } from "./child-labels.ts";
import type { KubeObject, ResourceRef } from "./kube-api.ts";
import type { Step } from "./step.ts";

type Owned = Operator["owns"][number];

/** Children by owned kind, then by "namespace/name"; only kinds that were listed are present. */
export type ListedChildren = Map<Owned, Map<string, KubeObject>>;

export const childKey = (namespace: string | undefined, name: string): string => `${namespace ?? ""}/${name}`;

export function kindRef(step: Step, owned: Owned, parent: KubeObject): ResourceRef {
  const namespace = owned.namespaced && step.operator.resource.scope === "Namespaced" ? parent.metadata.namespace : undefined;
  return { group: owned.group, version: owned.version, plural: owned.plural, ...(namespace ? { namespace } : {}) };
}

export async function listChildren(step: Step, parent: KubeObject): Promise<ListedChildren> {
  const uid = parent.metadata.uid ?? "";
  // The event stands for the parent's own change: any child change the watch cache may not show
  // yet has an event of its own behind it (core/event.ts ownChangeOnly). Not older than the parent
  // as read: that version follows this controller's own last writes (children first, then the
  // status), so they are all seen. Otherwise, from etcd.
  const read = ownChangeOnly(step.event) && parent.metadata.resourceVersion ? { notOlderThan: parent.metadata.resourceVersion } : undefined;
  const listed: ListedChildren = new Map();
  for (const owned of step.operator.owns) {
    if (!owned.observe && !owned.prune) continue;
    const items = await step.api.list(kindRef(step, owned, parent), `${PARENT_UID_LABEL}=${uid}`, read);
    // The label is only a hint anyone could set: the controller owner reference decides.
    const mine = items.filter((o) => controllerUid(o) === uid).map((o) => ({ ...o, apiVersion: apiVersionOf(owned.group, owned.version), kind: owned.kind }));
    listed.set(owned, new Map(mine.map((o) => [childKey(o.metadata.namespace, o.metadata.name), o])));
  }
  return listed;
}

/** How a reconcile gets its parent's children: `listChildren`, or a LIST started ahead of time. */
export type ChildLister = (parent: KubeObject) => Promise<ListedChildren>;

/**
 * Starts the children's LIST beside the parent's GET instead of after it — one API round trip
 * less per reconcile (the event names the parent's uid and version, which is all the LIST needs).
 * The early answer is used only if the parent read is the very version the event announced: a
 * newer one (a write since, a parent re-created under the same name) is listed again after it.
 * Events of a deletion start nothing early.
 */
export function prefetchChildren(step: Step): ChildLister {
  const { event } = step;
  const lists = step.operator.owns.some((o) => o.observe || o.prune);
  if (!lists || event.type === "DELETED") return (parent) => listChildren(step, parent);
  const announced = {
    apiVersion: apiVersionOf(event.group, event.version),
    kind: event.kind,
    metadata: { uid: event.uid, name: event.name, resourceVersion: event.resourceVersion, ...(event.namespace ? { namespace: event.namespace } : {}) },
  };
  const early = listChildren(step, announced);
  // Unused when the parent is gone, newer or being deleted; a failure then must not surface unhandled.
  early.catch(() => undefined);
  return (parent) => (parent.metadata.uid === event.uid && parent.metadata.resourceVersion === event.resourceVersion ? early : listChildren(step, parent));
}

/** What reconcile sees as `ctx.children`. */
export function observedChildren(operator: Operator, listed: ListedChildren): ObservedChildren {
  return {
    of<T = ObservedObject>(kind: string, apiVersion?: string): Readonly<Record<string, T>> {
      const owned = operator.owns.find((o) => o.kind === kind && (!apiVersion || apiVersionOf(o.group, o.version) === apiVersion));
      if (!owned?.observe) throw new Error(`ctx.children.of("${kind}"): ${kind} is not an observed kind; declare it in owns with observe: true`);
      const children = [...(listed.get(owned)?.values() ?? [])];
      return Object.freeze(Object.fromEntries(children.map((c) => [c.metadata.name, c as unknown as T])));
    },
  };
}
