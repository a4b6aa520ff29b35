// The contexts reconcile, effects and finalize receive, for calling them directly in a unit test.
import type { EffectsContext, FinalizeContext, ObjectReference, ReconcileContext, ReferencedObjects } from "../../core/operator.ts";
import { idempotencyKeyOf } from "../runtime/effects.ts";

/** By kind, then by name: what `ctx.children.of(kind)` and `ctx.references.of(kind)` return. */
export type ObjectsByKind = Record<string, Record<string, unknown>>;

const byKind = (objects: ObjectsByKind | undefined): ReferencedObjects => ({
  of: <T>(kind: string) => (objects?.[kind] ?? {}) as Readonly<Record<string, T>>,
});

/** `children`: the observed children by kind, then by name; `references`: the referenced objects likewise (one missing: leave it out). */
export function reconcileContext(opts: { now?: Date; children?: ObjectsByKind; references?: ObjectsByKind } = {}): ReconcileContext {
  return { now: opts.now ?? new Date(0), children: byKind(opts.children), references: byKind(opts.references) };
}

/**
 * The context effects receive. `object`: the key is the one the runtime derives from its uid and
 * generation; `env`: the environment to build cloud clients from (default: none, so a test never
 * reaches a real cloud by accident).
 */
export function effectsContext(opts: { now?: Date; object?: { metadata: { uid: string; generation: number } }; idempotencyKey?: string; references?: ObjectsByKind; env?: Record<string, string | undefined> } = {}): EffectsContext {
  const key = opts.idempotencyKey ?? (opts.object ? idempotencyKeyOf(opts.object.metadata.uid, opts.object.metadata.generation) : idempotencyKeyOf("test", 1));
  return { now: opts.now ?? new Date(0), idempotencyKey: key, references: byKind(opts.references), env: opts.env ?? {} };
}

/** The context finalize receives; `release` records nothing unless given. */
export function finalizeContext(opts: { now?: Date; env?: Record<string, string | undefined>; release?: (object: ObjectReference) => Promise<void> } = {}): FinalizeContext {
  return { now: opts.now ?? new Date(0), env: opts.env ?? {}, release: opts.release ?? (() => Promise.resolve()) };
}
