// When a reconciled object is due again: the soonest of what reconcile and effects asked for
// (requeueAfterSeconds) and the operator's timer (`every`). One schedule for all three:
// status.nextReconcile, reason Requeue, which the bridge announces when due.
import type { Operator } from "../../core/operator.ts";

export function requeueAfter(operator: Operator, ...asked: Array<number | undefined>): number | undefined {
  const all = [...asked, operator.every].filter((s): s is number => s !== undefined);
  return all.length === 0 ? undefined : Math.min(...all);
}
