// What a reconcile read besides its children, recorded in the object itself: the function writes
// `status.references` (each referenced object by kind and name, and the resourceVersion it read,
// absent when there was none) with the status it writes anyway. The bridge keeps a keys-only
// index from it (referenced object → parents) and announces a parent when what it references
// is no longer what it read: changed, created or deleted. The bridge runs no user code: names
// come from the function, which evaluates the operator's name functions and field paths.
// Shared by both sides, like the key event and the schedule.
import { z } from "zod";

/** The status field the runtime owns, beside observedGeneration, conditions and nextReconcile. */
export const REFERENCES_FIELD = "references";

/** At most this many referenced objects per object: the status stays small, the index bounded. */
export const MAX_REFERENCES = 64;

export const referenceRecordSchema = z.strictObject({
  apiVersion: z.string().min(1).max(100),
  kind: z.string().min(1).max(63),
  namespace: z.string().min(1).max(63).optional(),
  name: z.string().min(1).max(253),
  /** The version the reconcile read; absent: the object did not exist. */
  resourceVersion: z.string().min(1).max(32).optional(),
});

export type ReferenceRecord = z.infer<typeof referenceRecordSchema>;

export const referencesSchema = z.array(referenceRecordSchema).max(MAX_REFERENCES);

/** The references a status records; [] when none (or a malformed list: nothing to index). */
export function referencesOf(status: unknown): ReferenceRecord[] {
  if (typeof status !== "object" || status === null) return [];
  const parsed = referencesSchema.safeParse((status as Record<string, unknown>)[REFERENCES_FIELD]);
  return parsed.success ? parsed.data : [];
}
