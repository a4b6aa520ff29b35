// The context reconcile receives, for calling a reconcile directly in a unit test.
import type { ObservedChildren, ReconcileContext } from "../../core/operator.ts";

/** `children`: the observed children by kind, then by name (what `ctx.children.of(kind)` returns). */
export function reconcileContext(opts: { now?: Date; children?: Record<string, Record<string, unknown>> } = {}): ReconcileContext {
  const children: ObservedChildren = {
    of: <T>(kind: string) => (opts.children?.[kind] ?? {}) as Readonly<Record<string, T>>,
  };
  return { now: opts.now ?? new Date(0), children };
}
