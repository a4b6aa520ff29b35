// Test objects typed from an operator's own schema: a test writes the spec as a manifest would
// (defaults may be left out) and gets the object reconcile sees (defaults filled in).
import type { CustomObject, ObjectMeta, ObjectStatus, Operator } from "../../core/operator.ts";

/**
 * The object's metadata (only `name` required; namespace "default" for a namespaced resource,
 * generation 1, resourceVersion "1", a stable uid), and its spec as a manifest writes it: the
 * operator's schema validates it and fills its defaults.
 */
export type TestObjectInput<SpecInput> = Pick<ObjectMeta, "name"> & Partial<Omit<ObjectMeta, "name">> & { spec: SpecInput; status?: ObjectStatus };

/** The spec did not pass the operator's schema: the message lists every issue by path. */
export class TestObjectSpecError extends Error {
  override name = "TestObjectSpecError";
}

/**
 * The custom object `reconcile` and `finalize` receive, built from a spec in the schema's input
 * type and parsed by it, exactly as the runtime parses what it reads from the API server.
 */
export function testObject<Spec, SpecInput>(operator: Operator<Spec, SpecInput>, input: TestObjectInput<NoInfer<SpecInput>>): CustomObject<Spec> {
  const parsed = operator.spec.safeParse(input.spec);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => `${["spec", ...i.path.map(String)].join(".")}: ${i.message}`);
    throw new TestObjectSpecError(`testObject ${operator.resource.kind} ${input.name}: ${issues.join("; ")}`);
  }
  const { spec: _spec, status, namespace: given, ...meta } = input;
  const namespace = operator.resource.scope === "Namespaced" ? (given ?? "default") : undefined;
  const metadata: ObjectMeta = {
    uid: `uid-${namespace ?? "cluster"}-${input.name}`,
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
