// The least privilege a function needs for an operator, generated from its definition (the one
// truth: `crdfn generate` writes <out>/functions/ from this). Its resource: get (an event without the
// object, a re-read after a 409), patch only to add and remove a declared finalizer, update on
// /status. Its owned kinds: create, patch (server-side apply) and delete (pruning, by the uid the
// event names), and get only for kinds it observes (read by name): the bridge's event names the
// children, so the function neither lists nor reads what it does not observe, and cannot read an
// object of an owned kind it does not control (a Secret in its namespaces) unless it observes
// that kind. Referenced kinds (`reads`): get, read by name. Shared objects: get by name.
// Events: create, get, patch. Nothing else, and no
// list/watch: the bridge watches. RBAC cannot limit create or patch by owner; the admission
// policy (deploy/admission.ts) does, and RBAC's namespaces are the served ones (files.ts).
import type { Operator } from "../core/operator.ts";

export interface PolicyRule {
  apiGroups: string[];
  resources: string[];
  verbs: string[];
  resourceNames?: string[];
}

type Manifest = Record<string, unknown>;

/** The short name of an operator in identities, queues and files: its kind in lower case. */
export const operatorName = (operator: Operator<unknown>): string => operator.resource.kind.toLowerCase();

/** Who the function is in the cluster: its ServiceAccount (in-cluster, tokens) and the group an EKS access entry maps its Lambda role to. */
export function functionIdentity(operator: Operator<unknown>, functionsNamespace: string) {
  const name = operatorName(operator);
  return {
    serviceAccount: `crdfn-${name}`,
    namespace: functionsNamespace,
    username: `system:serviceaccount:${functionsNamespace}:crdfn-${name}`,
    group: `crdfn:${name}`,
  };
}

function ownedRules(kinds: ReadonlyArray<{ group: string; plural: string }>, verbs: string[]): PolicyRule[] {
  const byGroup = new Map<string, Set<string>>();
  for (const o of kinds) byGroup.set(o.group, (byGroup.get(o.group) ?? new Set()).add(o.plural));
  return [...byGroup].map(([g, plurals]) => ({ apiGroups: [g], resources: [...plurals].sort(), verbs }));
}

/** The rules split by where they apply: in each served namespace, or cluster-wide (cluster-scoped objects). */
export function rbacRulesByScope(operator: Operator<unknown>): { namespaced: PolicyRule[]; cluster: PolicyRule[] } {
  const { group, plural, scope } = operator.resource;
  const own: PolicyRule[] = [
    // get: the fresh read; patch: only a declared finalizer is ever added or removed.
    { apiGroups: [group], resources: [plural], verbs: operator.finalizer ? ["get", "patch"] : ["get"] },
    // The runtime PUTs status with a resourceVersion precondition.
    { apiGroups: [group], resources: [`${plural}/status`], verbs: ["update"] },
    // Children's owner references set blockOwnerDeletion, which OwnerReferencesPermissionEnforcement
    // allows only to who may update the owner's finalizers (a permission check; CRDs have no such subresource).
    { apiGroups: [group], resources: [`${plural}/finalizers`], verbs: ["update"] },
  ];
  // Server-side apply is a patch, which creates the object when it is missing; delete prunes
  // (uid precondition); get reads the children of the kinds it observes, by name.
  const childVerbs = ["create", "patch", "delete"];
  const ownedKeys = new Set(operator.owns.map((o) => `${o.group}/${o.plural}`));
  // A shared object: that name only (its release reads it first; apply creates or patches it).
  const shared = operator.shares.map((s) => ({
    apiGroups: [s.group],
    resources: [s.plural],
    resourceNames: [s.name],
    verbs: ownedKeys.has(`${s.group}/${s.plural}`) ? ["get"] : ["get", "create", "patch"],
  }));
  const observed = (namespaced: boolean) =>
    ownedRules(
      operator.owns.filter((o) => o.observe && o.namespaced === namespaced),
      ["get"],
    );
  // Kinds marked `list`: a parent with more children than an event carries keys for finds them by label.
  const listed = (namespaced: boolean) =>
    ownedRules(
      operator.owns.filter((o) => o.list && o.namespaced === namespaced),
      ["list"],
    );
  // Referenced kinds: read by name, the names their objects give (no list: a Secret it is not
  // referenced to stays unread as long as nobody references it).
  const referenced = (namespaced: boolean) =>
    ownedRules(
      operator.reads.filter((r) => r.namespaced === namespaced),
      ["get"],
    );
  const namespaced = [
    ...(scope === "Namespaced" ? own : []),
    ...ownedRules(
      operator.owns.filter((o) => o.namespaced),
      childVerbs,
    ),
    ...observed(true),
    ...listed(true),
    ...referenced(true),
    ...shared,
    // events.k8s.io/v1 with series: get and patch count a repeated failure on one Event.
    { apiGroups: ["events.k8s.io"], resources: ["events"], verbs: ["create", "get", "patch"] },
  ];
  const cluster = [
    ...(scope === "Cluster" ? own : []),
    ...ownedRules(
      operator.owns.filter((o) => !o.namespaced),
      childVerbs,
    ),
    ...observed(false),
    ...listed(false),
    ...referenced(false),
  ];
  return { namespaced, cluster };
}

/** All rules, as one ClusterRole would hold them (the function serving every namespace). */
export function rbacRulesOf(operator: Operator<unknown>): PolicyRule[] {
  const { namespaced, cluster } = rbacRulesByScope(operator);
  return [...cluster, ...namespaced];
}

/** The name of the function's Role in each served namespace, or of its ClusterRole. */
export const functionRoleName = (operator: Operator<unknown>): string => `crdfn-${operatorName(operator)}-function`;

/** A ClusterRole holding every rule (bind it to the functions' identity). */
export function clusterRoleOf(operator: Operator<unknown>, name = functionRoleName(operator)): Manifest {
  return { apiVersion: "rbac.authorization.k8s.io/v1", kind: "ClusterRole", metadata: { name }, rules: rbacRulesOf(operator) };
}

/**
 * The function's identity and its grants. `namespaces` empty: one ClusterRole for everything.
 * Otherwise a Role + RoleBinding in each served namespace, and a ClusterRole only for what is
 * cluster-scoped (a cluster-scoped resource, or owned kinds declared `namespaced: false`).
 */
export function functionRbacOf(operator: Operator<unknown>, o: { functionsNamespace: string; namespaces: readonly string[] }): Manifest[] {
  const id = functionIdentity(operator, o.functionsNamespace);
  const name = functionRoleName(operator);
  const subjects = [
    { kind: "ServiceAccount", name: id.serviceAccount, namespace: id.namespace },
    // The Lambda's IAM role, mapped by an EKS access entry to this group.
    { kind: "Group", apiGroup: "rbac.authorization.k8s.io", name: id.group },
  ];
  const serviceAccount: Manifest = { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: id.serviceAccount, namespace: id.namespace } };
  return [serviceAccount, ...grantsOf(name, subjects, rbacRulesByScope(operator), o.namespaces)];
}

/**
 * An identity's grants (`rules` bound to `subjects`) where they must live. `namespaces` empty: one
 * ClusterRole `name` with every rule. Otherwise a Role and RoleBinding `name` in each namespace,
 * and a ClusterRole `<name>-cluster` only for the cluster-scoped rules, when there are any.
 */
export function grantsOf(
  name: string,
  subjects: readonly unknown[],
  rules: { namespaced: PolicyRule[]; cluster: PolicyRule[] },
  namespaces: readonly string[],
): Manifest[] {
  const rbac = "rbac.authorization.k8s.io/v1";
  const clusterRole = (roleName: string, roleRules: PolicyRule[]): Manifest[] => [
    { apiVersion: rbac, kind: "ClusterRole", metadata: { name: roleName }, rules: roleRules },
    {
      apiVersion: rbac,
      kind: "ClusterRoleBinding",
      metadata: { name: roleName },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: roleName },
      subjects,
    },
  ];
  const { namespaced, cluster } = rules;
  if (namespaces.length === 0) return clusterRole(name, [...cluster, ...namespaced]);
  const out: Manifest[] = cluster.length > 0 ? clusterRole(`${name}-cluster`, cluster) : [];
  for (const namespace of namespaces) {
    out.push(
      { apiVersion: rbac, kind: "Role", metadata: { name, namespace }, rules: namespaced },
      {
        apiVersion: rbac,
        kind: "RoleBinding",
        metadata: { name, namespace },
        roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name },
        subjects,
      },
    );
  }
  return out;
}
