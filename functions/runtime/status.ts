// Computing the status the runtime writes, and deciding whether writing it would change anything.
import { setCondition, type Condition, type ConditionInput } from "../../core/conditions.ts";
import type { ObjectStatus, StatusInput } from "../../core/operator.ts";

export const READY = "Ready";

/** Status after a successful reconcile: the user's fields, observedGeneration, their conditions and Ready=True. */
export function successStatus(previous: ObjectStatus | undefined, input: StatusInput | undefined, generation: number, now: Date): ObjectStatus {
  const { conditions: reported = [], ...fields } = input ?? {};
  const ready: ConditionInput = { type: READY, status: "True", reason: "Reconciled", message: "", observedGeneration: generation };
  // Conditions the user no longer reports disappear; the ones still reported keep their transition times.
  const conditions = [...reported.filter((c) => c.type !== READY), ready].reduce<Condition[]>(
    (acc, c) => setCondition(acc, c, now),
    [],
  ).map((c) => keepTransition(previous?.conditions, c));
  return { ...fields, observedGeneration: generation, conditions };
}

/** Status after a permanent failure: the previous fields stay, Ready=False says why. */
export function failureStatus(previous: ObjectStatus | undefined, reason: string, message: string, generation: number, now: Date): ObjectStatus {
  const conditions = setCondition(previous?.conditions, { type: READY, status: "False", reason, message, observedGeneration: generation }, now);
  return { ...previous, observedGeneration: generation, conditions };
}

function keepTransition(previous: readonly Condition[] | undefined, c: Condition): Condition {
  const old = previous?.find((p) => p.type === c.type);
  return old && old.status === c.status ? { ...c, lastTransitionTime: old.lastTransitionTime } : c;
}

/** Order-insensitive deep equality of JSON values (the API server may reorder keys). */
export function sameJson(a: unknown, b: unknown): boolean {
  return canonicalJson(a) === canonicalJson(b);
}

/** JSON with sorted keys: equal values, equal text. */
export function canonicalJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonicalJson).join(",")}]`;
  if (v !== null && typeof v === "object") {
    const entries = Object.entries(v as Record<string, unknown>)
      .filter(([, x]) => x !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, x]) => `${JSON.stringify(k)}:${canonicalJson(x)}`).join(",")}}`;
  }
  return JSON.stringify(v);
}
