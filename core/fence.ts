// "Never backwards": a message's carried body may be older than the object (newer events of the
// object wait behind it in its FIFO group), so a reconcile may act on a stale view. Every child
// the function applies carries its parent's metadata.generation (PARENT_GENERATION_ANNOTATION),
// and the API server refuses a write of the function that lowers it: the generated
// ValidatingAdmissionPolicy says it in CEL (deploy/admission.ts), the testing kit's in-memory API
// server with `fenceVerdict`, both in the words below, so the runtime recognises either refusal
// and re-reads the object (a conflict), never records it as the object's failure.
import { PARENT_GENERATION_ANNOTATION } from "./event.ts";

/** The fixed words every fence refusal starts with; what the runtime matches. */
export const STALE_GENERATION_TOKEN = "crdfn: stale parent generation";

/** The words of a refusal: the policy's messageExpression builds the same text in CEL. */
export const staleRefusal = (resource: string, name: string, stored: number | string, written: number | string): string =>
  `${STALE_GENERATION_TOKEN}: ${resource} ${name} was applied from generation ${stored}, not ${written}`;

/** An API server's refusal of a child write because it came from an older generation of the parent. */
export function isStaleRefusal(e: { code: number; message: string }): boolean {
  return e.code === 403 && e.message.includes(STALE_GENERATION_TOKEN);
}

interface Obj {
  metadata: { [field: string]: unknown; annotations?: unknown; ownerReferences?: unknown };
}

/** The largest integer the policy's CEL parses (it takes at most 18 digits, as here). */
const FENCE_PATTERN = /^[0-9]{1,18}$/;

/** A child's fence: the parent generation it was last applied from; undefined when it carries no valid one. */
export function fenceOf(o: Obj | undefined): number | undefined {
  const value = (o?.metadata.annotations as Record<string, unknown> | undefined)?.[PARENT_GENERATION_ANNOTATION];
  return typeof value === "string" && FENCE_PATTERN.test(value) ? Number(value) : undefined;
}

const controllerUid = (o: Obj): string | undefined =>
  ((o.metadata.ownerReferences as Array<{ controller?: boolean; uid?: string }> | undefined) ?? []).find((r) => r.controller === true)?.uid;

/**
 * Why an update of a child is refused, or undefined: it lowers the fence of a child that stays
 * under the same controller (the same parent uid). A child without a fence is not fenced; a write
 * that drops the fence counts as lowering it; a new controller (a re-created parent of the same
 * name, whose generations start again at 1) starts afresh.
 */
export function fenceVerdict(resource: string, name: string, existing: Obj | undefined, next: Obj | undefined): string | undefined {
  if (existing === undefined || next === undefined) return undefined;
  const stored = fenceOf(existing);
  if (stored === undefined) return undefined;
  const uid = controllerUid(existing);
  if (uid === undefined || uid !== controllerUid(next)) return undefined;
  const written = fenceOf(next) ?? -1;
  return written >= stored ? undefined : staleRefusal(resource, name, stored, written);
}

/**
 * Must a child the function would otherwise skip (unchanged content) have its fence raised to the
 * generation acted on? Stale messages exist only behind a reconcile that acted on a view newer than
 * its own message (a re-read after a conflict, a redelivery's fresh read, effects' read): messages
 * behind it carry generations between the two. A child left at a lower fence would let one of
 * them write older content; raised, their writes are refused. When the view is the message's own
 * generation, every message behind it carries that generation or a newer one: nothing to raise.
 */
export function mustRaiseFence(messageGeneration: number, actedOn: number | undefined, childFence: number | undefined): boolean {
  if (actedOn === undefined || actedOn <= messageGeneration) return false;
  return childFence === undefined || childFence < actedOn;
}
