// The least privilege a function needs for an operator: its resource (read, finalizers, status),
// the kinds it owns (server-side apply), and Events. Generated, like the CRD, from the definition.
import type { Operator } from "./operator.ts";

export interface PolicyRule {
  apiGroups: string[];
  resources: string[];
  verbs: string[];
}

export function rbacRulesOf(operator: Operator<unknown>): PolicyRule[] {
  const { group, plural } = operator.resource;
  const owned = new Map<string, Set<string>>();
  for (const o of operator.owns) owned.set(o.group, (owned.get(o.group) ?? new Set()).add(o.plural));
  return [
    // get: the fresh read; patch: adding and removing the finalizer.
    { apiGroups: [group], resources: [plural], verbs: ["get", "patch"] },
    { apiGroups: [group], resources: [`${plural}/status`], verbs: ["update"] },
    // Setting blockOwnerDeletion on children needs update on the owner's finalizers.
    { apiGroups: [group], resources: [`${plural}/finalizers`], verbs: ["update"] },
    // Server-side apply is a patch, which creates the object when it is missing; get and list
    // read existing and observed children; delete prunes them (uid precondition).
    ...[...owned].map(([g, plurals]) => ({ apiGroups: [g], resources: [...plurals].sort(), verbs: ["get", "list", "create", "patch", "delete"] })),
    // events.k8s.io/v1 with series: get and patch count a repeated failure on one Event.
    { apiGroups: ["events.k8s.io"], resources: ["events"], verbs: ["create", "get", "patch"] },
  ];
}

/** A ClusterRole for the operator's functions (bind it to the functions' identity). */
export function clusterRoleOf(operator: Operator<unknown>, name = `crdfn-${operator.resource.plural}-functions`): Record<string, unknown> {
  return { apiVersion: "rbac.authorization.k8s.io/v1", kind: "ClusterRole", metadata: { name }, rules: rbacRulesOf(operator) };
}
