// Test objects typed from an operator's own schema: a test writes the spec as a manifest would
// (defaults may be left out) and gets the object reconcile sees (defaults filled in).
import type { CustomObject, ObjectMeta, ObjectStatus, Operator } from "../../core/operator.ts";

export interface TestObjectInput<SpecInput> {
  name: string;
  /** Default "default" for a namespaced resource; none for a cluster-scoped one. */
  namespace?: string;
  /** As written in a manifest: the operator's schema validates it and fills its defaults. */
  spec: SpecInput;
  status?: ObjectStatus;
  /** Default 1. */
  generation?: number;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  finalizers?: string[];
  /** Marks the object as being deleted (finalize runs). */
  deletionTimestamp?: string;
  creationTimestamp?: string;
  /** Default a stable uid derived from the namespace and name. */
  uid?: string;
  /** Default "1". */
  resourceVersion?: string;
}

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
  const namespaced = operator.resource.scope === "Namespaced";
  const namespace = namespaced ? (input.namespace ?? "default") : undefined;
  const metadata: ObjectMeta = {
    name: input.name,
    ...(namespace !== undefined && { namespace }),
    uid: input.uid ?? `uid-${namespace ?? "cluster"}-${input.name}`,
    resourceVersion: input.resourceVersion ?? "1",
    generation: input.generation ?? 1,
    ...(input.creationTimestamp !== undefined && { creationTimestamp: input.creationTimestamp }),
    ...(input.deletionTimestamp !== undefined && { deletionTimestamp: input.deletionTimestamp }),
    ...(input.labels !== undefined && { labels: input.labels }),
    ...(input.annotations !== undefined && { annotations: input.annotations }),
    ...(input.finalizers !== undefined && { finalizers: input.finalizers }),
  };
  return {
    apiVersion: operator.apiVersion,
    kind: operator.resource.kind,
    metadata,
    spec: parsed.data,
    ...(input.status !== undefined && { status: input.status }),
  };
}
