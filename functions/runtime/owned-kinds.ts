// From a child's apiVersion and kind to the owned kind the operator declared (and its REST location).
import { apiVersionOf, type Operator } from "../../core/operator.ts";
import type { ResourceRef } from "./kube-api.ts";

export type OwnedKindOf<O extends Operator<unknown>> = O["owns"][number];

export function ownedKind(operator: Operator<unknown>, apiVersion: string, kind: string): OwnedKindOf<Operator<unknown>> | undefined {
  return operator.owns.find((o) => apiVersionOf(o.group, o.version) === apiVersion && o.kind === kind);
}

/** undefined when the kind is not declared in `owns`. */
export function ownedRef(operator: Operator<unknown>, apiVersion: string, kind: string, namespace: string | undefined, name?: string): ResourceRef | undefined {
  const owned = ownedKind(operator, apiVersion, kind);
  if (!owned) return undefined;
  return { group: owned.group, version: owned.version, plural: owned.plural, ...(name ? { name } : {}), ...(owned.namespaced && namespace ? { namespace } : {}) };
}
