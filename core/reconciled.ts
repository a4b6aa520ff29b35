// What the function last reconciled, recorded in the object itself so that a new bridge (a
// restart, a failover) need not guess from timestamps whether an object needs work: the function
// writes `status.reconciled` with the status it writes anyway — a digest of the metadata it
// reconciled (labels, annotations, generation) and a digest of the children it left (each by uid
// and by what the bridge's index knows of it) — and a new bridge compares both with what it lists.
// The status write is skipped when nothing in it changed, so a settled object costs no write.
// Shared by both sides, like the key event, the schedule and the references.
import { z } from "zod";
import { digest, fingerprint, lastContentWriteWasApply, type AnyObject } from "./object-fingerprint.ts";
import { APPLIED_HASH_ANNOTATION } from "./event.ts";

/** The status field the runtime owns, beside observedGeneration, conditions, nextReconcile and references. */
export const RECONCILED_FIELD = "reconciled";

export const reconciledSchema = z.object({
  /** metadataDigest of the object the reconcile read. */
  metadata: z.string().min(1).max(32),
  /** childrenDigest of the children it left: applied, kept, or (not pruned) not wanted. */
  children: z.string().min(1).max(32),
  /** How many children that is (for a person reading the status). */
  childCount: z.number().int().nonnegative(),
});
export type Reconciled = z.infer<typeof reconciledSchema>;

/** What a status records; undefined when it records nothing (written by an older function) or something malformed. */
export function reconciledOf(status: unknown): Reconciled | undefined {
  if (typeof status !== "object" || status === null) return undefined;
  const parsed = reconciledSchema.safeParse((status as Record<string, unknown>)[RECONCILED_FIELD]);
  return parsed.success ? parsed.data : undefined;
}

/**
 * The metadata a reconcile may depend on beyond its spec: labels, annotations and the generation.
 * A resync stamp (an annotation) or a label-only change alters it, so it is announced once,
 * recorded, and then never again.
 */
export function metadataDigest(obj: AnyObject): string {
  const m = obj.metadata as { labels?: unknown; annotations?: unknown; generation?: unknown };
  return digest({ labels: m.labels ?? {}, annotations: m.annotations ?? {}, generation: m.generation ?? 0 });
}

/** One child as both sides see it: its uid, and its token (childToken). */
export interface ChildMark {
  uid: string;
  token: string;
}

/**
 * What the bridge's index knows of a child's content: its applied hash while the function's own
 * apply was the last write to its content, else the fingerprint of that content (someone else
 * wrote it: a second apply that changes nothing leaves that write the last). Either way an edit by
 * someone else since the function left it changes the token.
 */
export const childToken = (appliedHash: string | undefined, contentFingerprint: string): string => appliedHash ?? `fp:${contentFingerprint}`;

/** The applied hash the bridge's index keeps for a child: present only when the function's apply wrote its content last. */
export function appliedHashOf(child: AnyObject, fieldManager: string): string | undefined {
  if (!lastContentWriteWasApply(child, fieldManager)) return undefined;
  return (child.metadata as { annotations?: Record<string, string> }).annotations?.[APPLIED_HASH_ANNOTATION];
}

/**
 * A child's mark from its body (as an apply answered it, or as read), computed exactly as the
 * bridge does from its watch. A body without managedFields (an in-memory API server, which keeps
 * none) cannot say who wrote it last: the one who set its applied hash is taken to have.
 */
export function childMarkOf(child: AnyObject, fieldManager: string): ChildMark {
  const m = child.metadata as { uid?: string; managedFields?: unknown; annotations?: Record<string, string> };
  const hash = m.managedFields === undefined ? m.annotations?.[APPLIED_HASH_ANNOTATION] : appliedHashOf(child, fieldManager);
  return { uid: m.uid ?? "", token: childToken(hash, fingerprint(child, false)) };
}

/** A digest of a set of children, in any order. */
export function childrenDigest(children: readonly ChildMark[]): string {
  return digest(children.map((c) => `${c.uid}|${c.token}`).sort());
}

/** The record for an object as reconciled and the children it left. */
export function reconciledRecord(obj: AnyObject, children: readonly ChildMark[]): Reconciled {
  return { metadata: metadataDigest(obj), children: childrenDigest(children), childCount: children.length };
}
