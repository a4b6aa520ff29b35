// Standard metav1.Condition handling: a condition's lastTransitionTime moves only when its
// status flips, so an unchanged world produces an identical status (and the runtime skips the write).

export type ConditionStatus = "True" | "False" | "Unknown";

export interface Condition {
  type: string;
  status: ConditionStatus;
  /** CamelCase machine word, as metav1.Condition requires. */
  reason: string;
  message: string;
  observedGeneration?: number;
  lastTransitionTime: string;
}

/** What a caller states; the transition time is derived. */
export type ConditionInput = Omit<Condition, "lastTransitionTime">;

const REASON = /^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$/;
const MAX_MESSAGE = 32768;

/** Coerces a free-form reason into one the API server accepts. */
export function conditionReason(reason: string): string {
  const cleaned = reason
    .replace(/[^A-Za-z0-9_,:]/g, "")
    .replace(/^[^A-Za-z]+/, "")
    .replace(/[,:]+$/, "");
  return REASON.test(cleaned) ? cleaned.slice(0, 1024) : "Unknown";
}

/** Returns the list with `next` set, keeping the old transition time when the status did not flip. */
export function setCondition(conditions: readonly Condition[] | undefined, next: ConditionInput, now: Date): Condition[] {
  const list = [...(conditions ?? [])];
  const i = list.findIndex((c) => c.type === next.type);
  const previous = i >= 0 ? list[i] : undefined;
  const condition: Condition = {
    type: next.type,
    status: next.status,
    reason: conditionReason(next.reason),
    message: next.message.slice(0, MAX_MESSAGE),
    ...(next.observedGeneration === undefined ? {} : { observedGeneration: next.observedGeneration }),
    lastTransitionTime: previous && previous.status === next.status ? previous.lastTransitionTime : rfc3339Seconds(now),
  };
  if (i >= 0) list[i] = condition;
  else list.push(condition);
  return list;
}

export function findCondition(conditions: readonly Condition[] | undefined, type: string): Condition | undefined {
  return conditions?.find((c) => c.type === type);
}

/** metav1.Time has second precision; a sub-second time would never compare equal after a round trip. */
export function rfc3339Seconds(d: Date): string {
  return d.toISOString().replace(/\.\d{3}Z$/, "Z");
}
