// How the runtime marks the children it applies, so it can find them again with one labelled
// LIST per kind (observed children, pruning) and know whether a child already matches.
import { createHash } from "node:crypto";
import type { KubeObject } from "./kube-api.ts";
import { canonicalJson } from "../../core/canonical-json.ts";

// The parent's uid as a label (label values allow 63 characters, a uid has 36), and a hash of
// the object as last applied: a change to what reconcile wants means a new apply. Both names are
// the event contract's, which the bridge reads them by.
export { APPLIED_HASH_ANNOTATION, PARENT_UID_LABEL } from "../../core/event.ts";

export function appliedHash(body: KubeObject): string {
  return createHash("sha256").update(canonicalJson(body)).digest("hex").slice(0, 32);
}

export interface OwnerReference {
  apiVersion?: string;
  kind?: string;
  name?: string;
  uid?: string;
  controller?: boolean;
}

/** The object's controller owner reference, if any. */
export function controllerRef(object: KubeObject): OwnerReference | undefined {
  return ((object.metadata.ownerReferences as OwnerReference[] | undefined) ?? []).find((r) => r.controller);
}

/** Is the object controlled by this uid (its controller owner reference)? */
export function controllerUid(object: KubeObject): string | undefined {
  return controllerRef(object)?.uid;
}

/**
 * Does `observed` already hold everything `desired` sets? Maps may hold more (defaults, other
 * managers); lists must match item by item. Together with the applied hash (which catches fields
 * reconcile dropped) this decides that an apply would change nothing.
 */
export function holds(observed: unknown, desired: unknown): boolean {
  if (Array.isArray(desired)) return Array.isArray(observed) && observed.length === desired.length && desired.every((d, i) => holds(observed[i], d));
  if (desired !== null && typeof desired === "object") {
    if (observed === null || typeof observed !== "object" || Array.isArray(observed)) return false;
    return Object.entries(desired as Record<string, unknown>).every(([k, v]) => v === undefined || holds((observed as Record<string, unknown>)[k], v));
  }
  return observed === desired;
}
