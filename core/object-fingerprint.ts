// Digests of a Kubernetes object that both sides compute alike: the bridge to decide whether a
// change is news, the function to record what it left (core/reconciled.ts), which a new bridge
// compares with what it lists. One definition, so the two never disagree.
import { createHash } from "node:crypto";
import { canonicalJson } from "./canonical-json.ts";

/** The shape both sides' object types share: a metadata map and top-level fields. */
export interface AnyObject {
  metadata: object;
  [field: string]: unknown;
}

export interface ManagedFieldsEntry {
  manager?: string;
  operation?: string;
  subresource?: string;
  time?: string;
  fieldsV1?: { "f:metadata"?: { "f:finalizers"?: Record<string, unknown> } };
}

/**
 * A 96-bit digest of any JSON value (base64url, 16 characters: the first 16 of the SHA-256's). It
 * encodes the first 12 bytes rather than slicing the whole encoding: V8 keeps a slice of 13 or
 * more characters as a view of its 43-character source, 96 bytes a digest where 32 do, and the
 * bridge holds two per object.
 */
export const digest = (value: unknown): string => createHash("sha256").update(canonicalJson(value)).digest().subarray(0, 12).toString("base64url");

/**
 * A 96-bit digest of what a reconcile can depend on: labels, annotations, finalizers,
 * deletionTimestamp, ownerReferences and every top-level field but metadata and (unless
 * asked) status — so a write that touches only status, managedFields or resourceVersion
 * leaves it unchanged. Top-level fields other than spec count because kinds such as
 * ConfigMap keep their content in `data`.
 */
export function fingerprint(obj: AnyObject, includeStatus: boolean, includeFinalizers = true): string {
  const { metadata, status, ...content } = obj;
  const meta = metadata as Record<string, unknown>;
  return digest({
    content,
    status: includeStatus ? status : undefined,
    labels: meta.labels,
    annotations: meta.annotations,
    finalizers: includeFinalizers ? meta.finalizers : undefined,
    deletionTimestamp: meta.deletionTimestamp,
    ownerReferences: meta.ownerReferences,
  });
}

/**
 * Whether the latest write to the object's content (anything but its status subresource) was a
 * server-side apply by `fieldManager`. managedFields times have one-second resolution: when
 * several entries share the newest second, no single write is the latest and the answer is no.
 */
export function lastContentWriteWasApply(obj: AnyObject, fieldManager: string): boolean {
  const entries = ((obj.metadata as { managedFields?: ManagedFieldsEntry[] }).managedFields ?? []).filter(
    (e) => e.subresource === undefined && !Number.isNaN(Date.parse(e.time ?? "")),
  );
  const newest = Math.max(...entries.map((e) => Date.parse(e.time!)));
  const latest = entries.filter((e) => Date.parse(e.time!) === newest);
  const [only] = latest;
  return latest.length === 1 && only!.manager === fieldManager && only!.operation === "Apply";
}
