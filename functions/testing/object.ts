// Test objects typed from an operator's own schema: a test writes the object as a manifest would
// (metadata, and the spec with its defaults left out) and gets the object reconcile sees (defaults
// filled in). testObject and reconcileWithRuntime take this one shape.
import type { CustomObject, ObjectMeta, ObjectStatus, Operator } from "../../core/operator.ts";
import { zodLine } from "../../core/config-error.ts";

/**
 * An object as a manifest writes it: its metadata (only `name` required; namespace "default" for
 * a namespaced resource), its spec and, if it has one, its status. apiVersion and kind come from
 * the operator.
 */
export interface ObjectInput<SpecInput = unknown> {
  apiVersion?: string;
  kind?: string;
  metadata: Pick<ObjectMeta, "name"> & Partial<Omit<ObjectMeta, "name">>;
  spec: SpecInput;
  status?: ObjectStatus;
}

/** testObject's first shape, still taken: the metadata's fields beside the spec (`{ name, spec }`). */
export type TestObjectInput<SpecInput> = Pick<ObjectMeta, "name"> & Partial<Omit<ObjectMeta, "name">> & { spec: SpecInput; status?: ObjectStatus };

/** Either shape, as the manifest shape. */
export function objectInputOf<SpecInput>(input: ObjectInput<SpecInput> | TestObjectInput<SpecInput>): ObjectInput<SpecInput> {
  if ("metadata" in input) return input;
  const { spec, status, ...metadata } = input;
  return { metadata, spec, ...(status !== undefined && { status }) };
}

/** The spec did not pass the operator's schema: the message lists every issue by path. */
export class TestObjectSpecError extends Error {
  override name = "TestObjectSpecError";
}

/**
 * The custom object `reconcile` and `finalize` receive, built from a spec in the schema's input
 * type and parsed by it, exactly as the runtime parses what it reads from the API server (generation
 * 1, resourceVersion "1" and a stable uid unless given).
 */
export function testObject<Spec, SpecInput>(
  operator: Operator<Spec, SpecInput>,
  input: ObjectInput<NoInfer<SpecInput>> | TestObjectInput<NoInfer<SpecInput>>,
): CustomObject<Spec> {
  const { metadata: given, spec, status } = objectInputOf(input);
  const parsed = operator.spec.safeParse(spec);
  if (!parsed.success) throw new TestObjectSpecError(`testObject ${operator.resource.kind} ${given.name}: ${zodLine(parsed.error, { under: "spec" })}`);
  const { namespace: givenNamespace, ...meta } = given;
  const namespace = operator.resource.scope === "Namespaced" ? (givenNamespace ?? "default") : undefined;
  const metadata: ObjectMeta = {
    uid: `uid-${namespace ?? "cluster"}-${given.name}`,
    resourceVersion: "1",
    generation: 1,
    ...meta,
    ...(namespace !== undefined && { namespace }),
  };
  return {
    apiVersion: operator.apiVersion,
    kind: operator.resource.kind,
    metadata,
    spec: parsed.data,
    ...(status !== undefined && { status }),
  };
}
