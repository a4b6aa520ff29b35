// What a reconcile reads besides its object, side by side, before the user's code runs: what
// reconcile sees as `ctx.children` and, with effects, as `ctx.references`.
//
// Children: what a reconcile knows of its parent's children, without listing anything: their
// keys come with the event (the bridge's keys-only index of the children that carry crdfn's label
// and a controller reference to the parent), and the children of kinds marked `observe` are read
// by name. Keys may be a moment old: a child created a moment ago may be missing (it is applied
// again, which changes nothing; the bridge's index has it from its watch event on, so the
// parent's next event names it, and a prune it needs comes one reconcile later), a child gone a moment ago may still be listed (its read
// or delete answers 404). An event without keys (a parent with more children than an event can
// carry, or a v1 event) is answered by one labelled LIST per owned kind marked `list` (the
// function may list only those), paginated, which gives the same keys (and the observed kinds'
// bodies); the children of any other kind are then unknown: all applied, none pruned.
//
// References: the objects a reconcile references besides its children, named by the object (the
// operator's name functions and field paths, evaluated here, never in the bridge), read by name,
// and recorded in `status.references` with the version read, from which the bridge keeps its
// keys-only index (core/references.ts).
import { dnsLabel, dnsSubdomain, type ChildKey } from "../../core/event.ts";
import { PermanentError } from "../../core/errors.ts";
import {
  apiVersionOf,
  type CustomObject,
  type ObservedChildren,
  type ObservedObject,
  type Operator,
  type ReferencedObjects,
  type ReferenceName,
} from "../../core/operator.ts";
import { MAX_REFERENCES, type ReferenceRecord } from "../../core/references.ts";
import { keyOf } from "../../core/resource-path.ts";
import { childRef, listChildren, type ChildKeys, type ChildrenRead, type KnownChildren, type ObservedByKind } from "./children.ts";
import type { KubeObject, ResourceRef } from "./kube-api.ts";
import type { EventContext } from "./event-context.ts";
import { ReconcileThrew } from "./user-code.ts";

/** Both reads of one attempt. */
export interface Inputs {
  children: ChildrenRead;
  references: ReferencesRead;
}

/** References first: one that cannot be named fails the attempt before anything is read. */
export async function readInputs(ctx: EventContext, object: KubeObject, valid: CustomObject<unknown>): Promise<Inputs> {
  const [references, children] = await Promise.all([readReferences(ctx, valid), readChildren(ctx, object)]);
  return { children, references };
}

/** The children's keys, the observed ones read, and what reconcile sees of them as `ctx.children`. */
async function readChildren(ctx: EventContext, parent: KubeObject): Promise<ChildrenRead> {
  const known = await knownChildren(ctx, parent);
  const observed = await readObserved(ctx, known);
  return { known, observed, view: observedChildren(ctx.operator, observed) };
}

/** The children's keys from the event, or, when it carries none, listed by the parent label. */
async function knownChildren(ctx: EventContext, parent: KubeObject): Promise<KnownChildren> {
  const keys = childKeysOf(ctx);
  if (keys !== undefined) return { keys };
  const unlisted = ctx.operator.owns.filter((o) => !o.list).map((o) => o.kind);
  if (unlisted.length > 0)
    ctx.log.warn(
      { kinds: unlisted },
      `the event names no children (more than an event carries, or a v1 event) and ${unlisted.join(", ")} ${unlisted.length === 1 ? "is" : "are"} not marked list: true in owns: every such child wanted is applied, none pruned`,
    );
  return listChildren(ctx, parent);
}

/** The event's children, grouped by the kind the operator owns (keys of kinds it does not own are ignored). */
function childKeysOf(ctx: EventContext): ChildKeys {
  const children = ctx.event.children;
  if (children === undefined) return undefined;
  const keys: NonNullable<ChildKeys> = new Map(ctx.operator.owns.map((o) => [o, new Map<string, ChildKey>()]));
  for (const c of children) {
    const owned = ctx.operator.owns.find((o) => o.kind === c.kind && apiVersionOf(o.group, o.version) === c.apiVersion);
    keys.get(owned!)?.set(keyOf(c.namespace, c.name), c);
  }
  return keys;
}

/**
 * Reads the observed children by name, side by side: from the API server's watch cache, no
 * older than the version the bridge saw. One that is gone since is left out.
 */
async function readObserved(ctx: EventContext, { keys, listed }: KnownChildren): Promise<ObservedByKind> {
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

type Read = Operator["reads"][number];

/** One referenced object: which declared kind, where. */
export interface WantedReference {
  read: Read;
  namespace: string | undefined;
  name: string;
}

/** What was read: the object, or undefined when it does not exist. */
export type ReadReferences = Array<WantedReference & { object: KubeObject | undefined }>;

/** The value at a dotted path of the object ("spec.secretRef.name"); undefined where a step is missing. */
function atPath(object: unknown, path: string): unknown {
  let value: unknown = object;
  for (const key of path.split(".")) {
    if (typeof value !== "object" || value === null) return undefined;
    value = (value as Record<string, unknown>)[key];
  }
  return value;
}

/** The names one declared kind's entry gives for this object, as written (checked by the caller). */
function namesOf(read: Read, object: CustomObject<unknown>): unknown[] {
  let given: unknown;
  try {
    given = read.field !== undefined ? atPath(object, read.field) : read.name?.(object);
  } catch (thrown) {
    // The name function is the user's, like reconcile: a throw is a bug, shown as ReconcileError.
    throw new ReconcileThrew(thrown);
  }
  if (given === undefined || given === null || given === "") return [];
  return Array.isArray(given) ? given.filter((n) => n !== undefined && n !== null && n !== "") : [given];
}

/**
 * The objects this object references, in a stable order, each once. A namespaced object references
 * objects in its own namespace only (a reference elsewhere would let whoever may write the object
 * read what they may not: PermanentError ReferenceInOtherNamespace).
 */
function referencedKeys(ctx: EventContext, object: CustomObject<unknown>): WantedReference[] {
  const wanted = new Map<string, WantedReference>();
  const own = object.metadata.namespace;
  const namespacedParent = ctx.operator.resource.scope === "Namespaced";
  for (const read of ctx.operator.reads) {
    const via = read.field !== undefined ? `field ${read.field}` : "its name function";
    for (const raw of namesOf(read, object)) {
      const given = (typeof raw === "string" ? { name: raw } : raw) as Exclude<ReferenceName, string>;
      const name = dnsSubdomain.safeParse(typeof given === "object" && given !== null ? given.name : undefined);
      if (!name.success) throw new PermanentError(`${read.kind} reference from ${via}: ${JSON.stringify(raw)} is not an object name`, "InvalidReference");
      let namespace: string | undefined;
      if (read.namespaced) {
        const asked = given.namespace;
        if (namespacedParent) {
          if (asked !== undefined && asked !== own)
            throw new PermanentError(
              `${read.kind} ${asked}/${name.data}: a ${ctx.operator.resource.kind} references objects in its own namespace (${own ?? ""}) only`,
              "ReferenceInOtherNamespace",
            );
          namespace = own;
        } else {
          const ns = dnsLabel.safeParse(asked);
          if (!ns.success)
            throw new PermanentError(
              `${read.kind} ${name.data}: a cluster-scoped ${ctx.operator.resource.kind} names the namespace of a ${read.kind} ({ namespace, name })`,
              "InvalidReference",
            );
          namespace = ns.data;
        }
      }
      wanted.set(`${apiVersionOf(read.group, read.version)}|${read.kind}|${keyOf(namespace, name.data)}`, { read, namespace, name: name.data });
    }
  }
  if (wanted.size > MAX_REFERENCES) throw new PermanentError(`references ${wanted.size} objects; at most ${MAX_REFERENCES}`, "TooManyReferences");
  return [...wanted.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, w]) => w);
}

const refOf = (w: WantedReference): ResourceRef => ({
  group: w.read.group,
  version: w.read.version,
  plural: w.read.plural,
  name: w.name,
  ...(w.namespace ? { namespace: w.namespace } : {}),
});

/** What was read, for status.references (undefined: the operator references nothing) and as `ctx.references`. */
export interface ReferencesRead {
  records: ReferenceRecord[] | undefined;
  objects: ReferencedObjects;
}

/**
 * The objects this object references, read by name, side by side, from etcd (a change the bridge
 * saw is there already); one missing is undefined. A reference that cannot be named throws at
 * once, before anything is read.
 */
function readReferences(ctx: EventContext, object: CustomObject<unknown>): Promise<ReferencesRead> {
  const { operator } = ctx;
  if (operator.reads.length === 0) return Promise.resolve({ records: undefined, objects: referencedObjects(operator, [], object.metadata.namespace) });
  const wanted = referencedKeys(ctx, object);
  return Promise.all(wanted.map(async (w) => ({ ...w, object: await ctx.api.get(refOf(w)) }))).then((read) => ({
    records: referenceRecords(read),
    objects: referencedObjects(operator, read, object.metadata.namespace),
  }));
}

/** What status.references records: each object by kind and name, with the version read (none: it did not exist). */
function referenceRecords(read: ReadReferences): ReferenceRecord[] {
  return read.map((r) => ({
    apiVersion: apiVersionOf(r.read.group, r.read.version),
    kind: r.read.kind,
    ...(r.namespace ? { namespace: r.namespace } : {}),
    name: r.name,
    ...(r.object?.metadata.resourceVersion ? { resourceVersion: r.object.metadata.resourceVersion } : {}),
  }));
}

/** What reconcile and effects see as `ctx.references`. */
export function referencedObjects(operator: Operator, read: ReadReferences, parentNamespace: string | undefined): ReferencedObjects {
  return {
    of<T = ObservedObject>(kind: string, apiVersion?: string): Readonly<Record<string, T>> {
      const declared = operator.reads.find((r) => r.kind === kind && (!apiVersion || apiVersionOf(r.group, r.version) === apiVersion));
      if (!declared) throw new Error(`ctx.references.of("${kind}"): ${kind} is not declared in reads`);
      const found = read.filter((r) => r.read === declared && r.object !== undefined);
      return Object.freeze(
        Object.fromEntries(
          found.map((r) => [r.namespace === undefined || r.namespace === parentNamespace ? r.name : `${r.namespace}/${r.name}`, r.object as unknown as T]),
        ),
      );
    },
  };
}
