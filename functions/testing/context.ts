// The contexts reconcile, effects and finalize receive, for calling them directly in a unit test.
// Given the operator, `ctx.children` and `ctx.references` are the runtime's own
// (runtime/reads.ts): asking for a kind the operator does not observe, or does not read, throws as it
// does in production.
import type { EffectsContext, FinalizeContext, ObjectReference, ObservedChildren, Operator, ReconcileContext, ReferencedObjects } from "../../core/operator.ts";
import { idempotencyKeyOf } from "../runtime/user-code.ts";
import type { KubeObject } from "../runtime/kube-api.ts";
import { type ObservedByKind } from "../runtime/children.ts";
import { keyOf } from "../../core/resource-path.ts";
import { observedChildren, referencedObjects, type ReadReferences } from "../runtime/reads.ts";

/** By kind, then by name: what `ctx.children.of(kind)` and `ctx.references.of(kind)` return. */
export type ObjectsByKind = Record<string, Record<string, unknown>>;

export interface ContextOptions {
  /** ctx.now; default the epoch. */
  now?: Date;
  /** The observed children, by kind then by name. */
  children?: ObjectsByKind;
  /** The referenced objects, by kind then by name ("namespace/name" for one in another namespace); one missing: leave it out. */
  references?: ObjectsByKind;
}

/**
 * A context builder's two forms. With the operator (as a unit test should pass it), `children.of`
 * and `references.of` are the runtime's: a kind the operator does not observe (owns with
 * `observe: true`) or read (`reads`) throws, and so does a kind given here that it does not. With
 * the options alone, only the kinds given are known, and any other throws.
 */
export interface ContextBuilder<Options, Context> {
  <Spec, SpecInput, Status extends Record<string, unknown>>(operator: Operator<Spec, SpecInput, Status>, opts?: Options): Context;
  (opts?: Options): Context;
}

/** The context reconcile receives. */
export const reconcileContext: ContextBuilder<ContextOptions, ReconcileContext> = (first?: object, second?: ContextOptions) => {
  const [operator, opts = {}] = split(first, second);
  return {
    now: opts.now ?? new Date(0),
    children: operator ? childrenOf(operator, opts.children ?? {}) : givenOnly("children", opts.children ?? {}),
    references: referencesFor(operator, opts.references),
  };
};

const isOperator = (v: unknown): v is Operator<unknown> => typeof v === "object" && v !== null && "reconcile" in v && "resource" in v;
/** (operator, options) or (options): the operator, if any, and the options. */
const split = <O>(first: object | undefined, second: O | undefined): [Operator<unknown> | undefined, O | undefined] =>
  isOperator(first) ? [first, second] : [undefined, first as O | undefined];

/** The runtime's `ctx.children` over the given objects, each filed under the owned kind it is. */
function childrenOf(operator: Operator<unknown>, given: ObjectsByKind): ObservedChildren {
  const observed: ObservedByKind = new Map();
  for (const [kind, byName] of Object.entries(given)) {
    const owned = operator.owns.find((o) => o.kind === kind);
    if (!owned?.observe)
      throw new Error(
        `reconcileContext: children of ${kind}, which ${operator.resource.kind} does not observe (owns with observe: true): the runtime never gives it any`,
      );
    const objects = new Map<string, KubeObject>();
    for (const [name, o] of Object.entries(byName))
      objects.set(keyOf(undefined, name), { ...(o as KubeObject), metadata: { ...(o as KubeObject).metadata, name } });
    observed.set(owned, objects);
  }
  return observedChildren(operator, observed);
}

/** The runtime's `ctx.references` over the given objects, or, without the operator, only those. */
function referencesFor(operator: Operator<unknown> | undefined, given: ObjectsByKind = {}): ReferencedObjects {
  return operator ? referencesOf(operator, given) : givenOnly("references", given);
}

/** The runtime's `ctx.references` over the given objects. */
function referencesOf(operator: Operator<unknown>, given: ObjectsByKind): ReferencedObjects {
  const read: ReadReferences = [];
  for (const [kind, byKey] of Object.entries(given)) {
    const declared = operator.reads.find((r) => r.kind === kind);
    if (!declared)
      throw new Error(`reconcileContext: references of ${kind}, which ${operator.resource.kind} does not declare in reads: the runtime never gives it any`);
    for (const [key, o] of Object.entries(byKey)) {
      const [namespace, name] = key.includes("/") ? (key.split("/", 2) as [string, string]) : [undefined, key];
      read.push({ read: declared, namespace, name, object: o as KubeObject });
    }
  }
  return referencedObjects(operator, read, undefined);
}

/** Without the operator: the kinds given are all that is known. */
function givenOnly(what: "children" | "references", objects: ObjectsByKind): ReferencedObjects {
  return {
    of: <T>(kind: string) => {
      const found = objects[kind];
      if (found === undefined)
        throw new Error(
          `ctx.${what}.of("${kind}"): no ${kind} given to reconcileContext; pass the operator (reconcileContext(operator, …)) to have the runtime's answer`,
        );
      return Object.freeze({ ...found }) as Readonly<Record<string, T>>;
    },
  };
}

export interface EffectsContextOptions {
  now?: Date;
  /** The key is the one the runtime derives from its uid and generation. */
  object?: { metadata: { uid: string; generation: number } };
  idempotencyKey?: string;
  /** The referenced objects, as for reconcileContext. */
  references?: ObjectsByKind;
  /** The environment to build cloud clients from (default: none, so a test never reaches a real cloud by accident). */
  env?: Record<string, string | undefined>;
}

/** The context effects receive; `references.of` as in reconcileContext. */
export const effectsContext: ContextBuilder<EffectsContextOptions, EffectsContext> = (first?: object, second?: EffectsContextOptions) => {
  const [operator, opts = {}] = split(first, second);
  const key = opts.idempotencyKey ?? (opts.object ? idempotencyKeyOf(opts.object.metadata.uid, opts.object.metadata.generation) : idempotencyKeyOf("test", 1));
  return { now: opts.now ?? new Date(0), idempotencyKey: key, references: referencesFor(operator, opts.references), env: opts.env ?? {} };
};

/** The context finalize receives; `release` records nothing unless given. */
export function finalizeContext(
  opts: { now?: Date; env?: Record<string, string | undefined>; release?: (object: ObjectReference) => Promise<void> } = {},
): FinalizeContext {
  return { now: opts.now ?? new Date(0), env: opts.env ?? {}, release: opts.release ?? (() => Promise.resolve()) };
}
