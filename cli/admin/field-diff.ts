// Field-level differences between two JSON values, as `kubectl diff` readers think of them: one
// line per leaf that changed, named by its path (`data.message`, `spec.ports[0].port`). Hand-written
// because it is a dozen lines over plain JSON and the path spelling is ours; a diff library would
// bring its own change model to translate.

export interface FieldChange {
  path: string;
  /** undefined: the field is added. */
  before?: unknown;
  /** undefined: the field is removed. */
  after?: unknown;
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

const step = (path: string, key: string | number): string =>
  typeof key === "number" ? `${path}[${key}]` : /^[A-Za-z_][A-Za-z0-9_-]*$/.test(key) ? (path ? `${path}.${key}` : key) : `${path}[${JSON.stringify(key)}]`;

/** Every leaf that differs between `before` and `after`, in path order. */
export function fieldChanges(before: unknown, after: unknown, path = ""): FieldChange[] {
  if (isRecord(before) && isRecord(after)) {
    const keys = [...new Set([...Object.keys(before), ...Object.keys(after)])].sort();
    return keys.flatMap((k) => fieldChanges(before[k], after[k], step(path, k)));
  }
  if (Array.isArray(before) && Array.isArray(after) && before.length === after.length) {
    return before.flatMap((b, i) => fieldChanges(b, after[i], step(path, i)));
  }
  if (JSON.stringify(before) === JSON.stringify(after)) return [];
  return [{ path, ...(before === undefined ? {} : { before }), ...(after === undefined ? {} : { after }) }];
}

/** A value with parts of its own: an object with a field, a list with an item. */
const whole = (v: unknown): v is Record<string, unknown> | unknown[] => (isRecord(v) && Object.keys(v).length > 0) || (Array.isArray(v) && v.length > 0);

/** Its parts in path order: a list's by index, an object's by name. */
const parts = (v: Record<string, unknown> | unknown[]): Array<[string | number, unknown]> =>
  Array.isArray(v)
    ? v.map((x, i) => [i, x])
    : Object.keys(v)
        .sort()
        .map((k) => [k, v[k]]);

/**
 * fieldChanges, with a value that is added (or removed) whole, an object or a list, spelled out
 * leaf by leaf (`conditions[0].reason: + "Reconciled"`): a whole new status is read field by
 * field, not as one line of JSON cut at its width.
 */
export function leafChanges(before: unknown, after: unknown, path = ""): FieldChange[] {
  if (before === undefined && whole(after)) return parts(after).flatMap(([k, v]) => leafChanges(undefined, v, step(path, k)));
  if (after === undefined && whole(before)) return parts(before).flatMap(([k, v]) => leafChanges(v, undefined, step(path, k)));
  if (isRecord(before) && isRecord(after)) {
    const keys = [...new Set([...Object.keys(before), ...Object.keys(after)])].sort();
    return keys.flatMap((k) => leafChanges(before[k], after[k], step(path, k)));
  }
  return fieldChanges(before, after, path);
}

/** `inner` is the field `outer` or one inside it (`a.b[0]` is inside `a.b`, `a.bc` is not). */
export const isWithin = (inner: string, outer: string): boolean =>
  outer === "" || inner === outer || inner.startsWith(`${outer}.`) || inner.startsWith(`${outer}[`);

const shown = (v: unknown): string => {
  const text = JSON.stringify(v);
  return text.length > 120 ? `${text.slice(0, 117)}...` : text;
};

/** One line per change: `path: before → after`, `path: + value`, `path: - value`. */
export function formatChange(c: FieldChange): string {
  if (!("before" in c)) return `${c.path}: + ${shown(c.after)}`;
  if (!("after" in c)) return `${c.path}: - ${shown(c.before)}`;
  return `${c.path}: ${shown(c.before)} → ${shown(c.after)}`;
}
