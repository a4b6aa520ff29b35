// A watched object: the few fields of a Kubernetes object the bridge reads (checked on every
// watch event), and the small fingerprint of the rest that decides whether a change is worth
// announcing. The bridge never keeps a body; the functions' full object type is KubeObject
// (functions/runtime/kube-api.ts).
import { z } from "zod";
import { digest, type ManagedFieldsEntry } from "../core/object-fingerprint.ts";
import { groupOf } from "../core/resource-path.ts";

// The digests the functions compute alike live in core; the bridge's callers import them from here.
export { fingerprint, lastContentWriteWasApply, type ManagedFieldsEntry } from "../core/object-fingerprint.ts";

const ownerReferenceSchema = z.looseObject({
  apiVersion: z.string(),
  kind: z.string(),
  name: z.string(),
  uid: z.string(),
  controller: z.boolean().optional(),
});

export const watchedObjectSchema = z.looseObject({
  metadata: z.looseObject({
    name: z.string().min(1),
    namespace: z.string().optional(),
    uid: z.string().min(1),
    resourceVersion: z.string().min(1),
    generation: z.number().int().optional(),
    ownerReferences: z.array(ownerReferenceSchema).optional(),
    finalizers: z.array(z.string()).optional(),
  }),
});
export type WatchedObject = z.infer<typeof watchedObjectSchema>;
export type OwnerReference = z.infer<typeof ownerReferenceSchema>;

/** A digest of the object's status alone (see fingerprint). */
export function statusFingerprint(obj: WatchedObject): string {
  return digest((obj as { status?: unknown }).status ?? null);
}

/** The owner reference of the controller, if it is of the given group and kind. */
export function controllerOf(obj: WatchedObject, group: string, kind: string): OwnerReference | undefined {
  return obj.metadata.ownerReferences?.find((r) => r.controller === true && r.kind === kind && groupOf(r.apiVersion) === group);
}

/** The finalizers `manager` set on the object, as its managedFields record them (`v:"name"` keys). */
export function finalizersManagedBy(obj: WatchedObject, manager: string): Set<string> {
  const owned = new Set<string>();
  for (const e of (obj.metadata as { managedFields?: ManagedFieldsEntry[] }).managedFields ?? []) {
    if (e.manager !== manager || e.subresource !== undefined) continue;
    for (const k of Object.keys(e.fieldsV1?.["f:metadata"]?.["f:finalizers"] ?? {})) {
      if (!k.startsWith("v:")) continue;
      try {
        const name: unknown = JSON.parse(k.slice(2));
        if (typeof name === "string") owned.add(name);
      } catch {
        // Not a value key this code knows: not counted as the manager's.
      }
    }
  }
  return owned;
}

/** The newest write (epoch ms, one-second resolution) among the managedFields entries `which` selects; 0 if none. */
export function lastWriteOf(obj: WatchedObject, which: (e: ManagedFieldsEntry) => boolean): number {
  let newest = 0;
  for (const e of (obj.metadata as { managedFields?: ManagedFieldsEntry[] }).managedFields ?? []) {
    const t = Date.parse(e.time ?? "");
    if (!Number.isNaN(t) && t > newest && which(e)) newest = t;
  }
  return newest;
}
