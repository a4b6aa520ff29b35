// The contexts reconcile, effects and finalize receive, for calling them directly in a unit test.
// Given the operator, `ctx.children` and `ctx.references` are the runtime's own
// (runtime/reads.ts): asking for a kind the operator does not observe, or does not read, throws as it
// does in production. reconcileContext has that one form: a reconcile test without the operator
// would answer for kinds the runtime never gives it.
import type { EffectsContext, FinalizeContext, ObjectReference, ObservedChildren, Operator, ReconcileContext, ReferencedObjects } from "../../core/operator.ts";
import { idempotencyKeyOf } from "../runtime/user-code.ts";
import type { KubeObject } from "../runtime/kube-api.ts";
import { type ObservedByKind } from "../runtime/children.ts";
import { keyOf } from "../../core/resource-path.ts";
import { observedChildren, referencedObjects, type ReadReferences } from "../runtime/reads.ts";

/**
 * By kind, then by name: what `ctx.children.of(kind)` and `ctx.references.of(kind)` return, e.g.
 * `{ Deployment: { "web": deployment } }`. Each object as the API server holds it (apiVersion,
 * kind, metadata, spec, status); under a child's name its `metadata.name` is that name.
 */
export type ObjectsByKind = Record<string, Record<string, unknown>>;

export interface ContextOptions {
  /** ctx.now; default the epoch (1970-01-01T00:00:00Z). */
  now?: Date;
  /**
   * The observed children, by kind then by name: only kinds the operator owns with
   * `observe: true` (another throws). A kind left out is observed with no children, as at the
   * first reconcile; a child reconcile applies is seen only by the next one.
   */
  children?: ObjectsByKind;
  /**
   * The referenced objects, by kind then by name ("namespace/name" for one a cluster-scoped
   * object names in a namespace): only kinds in `reads` (another throws). One missing: leave it out.
   */
  references?: ObjectsByKind;
}

/**
 * A context builder's two forms. With the operator (as a unit test should pass it), `children.of`
 * and `references.of` are the runtime's: a kind the operator does not observe (owns with
 * `observe: true`) or read (`reads`) throws, and so does a kind given here that it does not. With
 * the options alone, only the kinds given are known, and any other throws. (effectsContext has
 * both; reconcileContext only the first.)
 */
export interface ContextBuilder<Options, Context> {
  <Spec, SpecInput, Status extends Record<string, unknown>>(operator: Operator<Spec, SpecInput, Status>, opts?: Options): Context;
  (opts?: Options): Context;
}

/**
 * The context reconcile receives: `reconcileContext(operator, { now, children, references })`,
 * every option optional. `ctx.children.of(kind)` and `ctx.references.of(kind)` answer as the
 * runtime's do: the objects given, keyed by name, frozen; a kind the operator does not observe or
 * read throws, as in production.
 */
export function reconcileContext<Spec, SpecInput, Status extends Record<string, unknown>>(
  operator: Operator<Spec, SpecInput, Status>,
  opts: ContextOptions = {},
): ReconcileContext {
  // Plain JavaScript may still pass the options first, as an older form did.
  if (!isOperator(operator))
    throw new Error(
      "reconcileContext(operator, { now, children, references }): pass the operator first, so that ctx.children and ctx.references answer as the runtime's do",
    );
  const op = operator as Operator<unknown>;
  return { now: opts.now ?? new Date(0), children: childrenOf(op, opts.children ?? {}), references: referencesOf(op, opts.references ?? {}) };
}

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
  return operator ? referencesOf(operator, given) : givenOnly(given);
}

/** The runtime's `ctx.references` over the given objects. */
function referencesOf(operator: Operator<unknown>, given: ObjectsByKind): ReferencedObjects {
  const read: ReadReferences = [];
  for (const [kind, byKey] of Object.entries(given)) {
    const declared = operator.reads.find((r) => r.kind === kind);
    if (!declared) throw new Error(`references of ${kind}, which ${operator.resource.kind} does not declare in reads: the runtime never gives it any`);
    for (const [key, o] of Object.entries(byKey)) {
      const [namespace, name] = key.includes("/") ? (key.split("/", 2) as [string, string]) : [undefined, key];
      read.push({ read: declared, namespace, name, object: o as KubeObject });
    }
  }
  return referencedObjects(operator, read, undefined);
}

/** effectsContext without the operator: the kinds given are all that is known. */
function givenOnly(objects: ObjectsByKind): ReferencedObjects {
  return {
    of: <T>(kind: string) => {
      const found = objects[kind];
      if (found === undefined)
        throw new Error(
          `ctx.references.of("${kind}"): no ${kind} given to effectsContext; pass the operator (effectsContext(operator, …)) to have the runtime's answer`,
        );
      return Object.freeze({ ...found }) as Readonly<Record<string, T>>;
    },
  };
}

export interface EffectsContextOptions {
  /** ctx.now; default the epoch. */
  now?: Date;
  /** The object effects runs for: ctx.idempotencyKey is then the one the runtime derives from its uid and generation. */
  object?: { metadata: { uid: string; generation: number } };
  /** ctx.idempotencyKey as given; default from `object`, else from uid "test", generation 1. */
  idempotencyKey?: string;
  /** The referenced objects, as for reconcileContext. */
  references?: ObjectsByKind;
  /** The environment to build cloud clients from (default: none, so a test never reaches a real cloud by accident). */
  env?: Record<string, string | undefined>;
}

/**
 * The context effects receive: `effectsContext(operator, { now, object, idempotencyKey, references,
 * env })`, `references.of` as in reconcileContext. Without the operator (an effects that reads no
 * references), only the kinds given in `references` are known.
 */
export const effectsContext: ContextBuilder<EffectsContextOptions, EffectsContext> = (first?: object, second?: EffectsContextOptions) => {
  const [operator, opts = {}] = split(first, second);
  const key = opts.idempotencyKey ?? (opts.object ? idempotencyKeyOf(opts.object.metadata.uid, opts.object.metadata.generation) : idempotencyKeyOf("test", 1));
  return { now: opts.now ?? new Date(0), idempotencyKey: key, references: referencesFor(operator, opts.references), env: opts.env ?? {} };
};

export interface FinalizeContextOptions {
  /** ctx.now; default the epoch. */
  now?: Date;
  /** ctx.env; default none, as for effectsContext. */
  env?: Record<string, string | undefined>;
  /** ctx.release; default one that does nothing (record its calls to assert what finalize withdraws). */
  release?: (object: ObjectReference) => Promise<void>;
}

/**
 * The context finalize receives: `finalizeContext({ now, env, release })`. It takes no operator:
 * finalize reads no children or references. To run finalize as the runtime does (the finalizer
 * removed, the shared objects released for real), use reconcileWithRuntime on an object being deleted.
 */
export function finalizeContext(opts: FinalizeContextOptions = {}): FinalizeContext {
  return { now: opts.now ?? new Date(0), env: opts.env ?? {}, release: opts.release ?? (() => Promise.resolve()) };
}
