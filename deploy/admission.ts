// What RBAC cannot say, the API server enforces with ValidatingAdmissionPolicies (CEL, GA since
// Kubernetes 1.30), two per operator, each matching only that operator's function identity:
//   * never a write in kube-system, the bridge's or the functions' namespace, nor in a namespace
//     the operator does not serve (the namespace policy);
//   * (the ownership policy) an object of an owned kind may be created or changed only with a controller owner reference
//     to the operator's kind, and changed or deleted only if the object already stored is
//     controlled by that same parent (the same uid: a write never changes a child's controller,
//     not even to another object of the same name, which the API server cannot tell from an
//     earlier incarnation's; a re-created parent deletes its predecessor's child and creates its
//     own) — so neither a forged object, nor a take-over of another controller's, nor another
//     parent's, nor a fence lowered by way of a made-up controller, passes. The function writes children without reading them, so this is
//     what keeps it from taking what is not its own (core/ownership.ts says the same in
//     TypeScript, for the testing kit, in the same words). Exceptions: the operator's declared
//     shared objects (by name) while no controller owns them, and an orphan of a kind declared
//     `adopt: true`, which may be taken over;
//   * an update of an owned child may not lower its crdfn.io/parent-generation while it stays
//     under the same parent (core/fence.ts): a stale view of the parent costs a retry, never a
//     step back.
import { PARENT_GENERATION_ANNOTATION } from "../core/event.ts";
import { staleRefusal } from "../core/fence.ts";
import type { Operator } from "../core/operator.ts";
import { refusal } from "../core/ownership.ts";
import { functionIdentity, operatorName } from "./rbac.ts";

type Manifest = Record<string, unknown>;

/** A CEL string literal. */
const lit = (s: string): string => `'${s.replace(/\\/g, "\\\\").replace(/'/g, "\\'")}'`;
const list = (xs: readonly string[]): string => `[${xs.map(lit).join(", ")}]`;
const anyOf = (xs: string[]): string => (xs.length === 0 ? "false" : xs.map((x) => `(${x})`).join(" || "));
const isResource = (group: string, plural: string): string => `request.resource.group == ${lit(group)} && request.resource.resource == ${lit(plural)}`;

/** The ownership policy's (and its binding's) name: what the function may do to an owned kind. */
export const admissionPolicyName = (operator: Operator<unknown>): string => `crdfn-${operatorName(operator)}-function`;
/** The namespace policy's (and its binding's) name: where the function may never write. */
export const namespacePolicyName = (operator: Operator<unknown>): string => `crdfn-${operatorName(operator)}-function-namespaces`;

/** A policy's selection of namespaces by name (the label the API server puts on every namespace). */
const namespaces = (operator: "In" | "NotIn", names: readonly string[]): Manifest => ({
  namespaceSelector: { matchExpressions: [{ key: "kubernetes.io/metadata.name", operator, values: [...names] }] },
});
const WRITES = ["CREATE", "UPDATE", "DELETE"];

// Two policies rather than one matching every write, because the API server pays for a policy on
// every request its matchConstraints select, whoever sends it: it builds the CEL inputs (object,
// oldObject, the request, each converted by reflection) once for the match conditions and again
// for the validations, the messages and the audit annotations (k8s.io/apiserver v0.34). Selected by
// kind and namespace, the function's status write and Events, which only the namespace rule
// concerns, are selected by neither in a namespace it may write in (docs/performance.md, "Where
// the policy's CPU goes"), and nobody else's writes pay the match condition outside the two.
export function admissionPolicyOf(
  operator: Operator<unknown>,
  o: { functionsNamespace: string; namespaces: readonly string[]; denied: readonly string[] },
): Manifest[] {
  return [...ownershipPolicyOf(operator, o), ...namespacePolicyOf(operator, o)];
}

const policyAndBinding = (name: string, spec: Manifest): Manifest[] => [
  { apiVersion: "admissionregistration.k8s.io/v1", kind: "ValidatingAdmissionPolicy", metadata: { name }, spec: { failurePolicy: "Fail", ...spec } },
  {
    apiVersion: "admissionregistration.k8s.io/v1",
    kind: "ValidatingAdmissionPolicyBinding",
    metadata: { name },
    spec: { policyName: name, validationActions: ["Deny"] },
  },
];

/** Only this function's identities: the ServiceAccount and the Lambda role's group. */
function isTheFunction(operator: Operator<unknown>, functionsNamespace: string): Manifest[] {
  const id = functionIdentity(operator, functionsNamespace);
  return [{ name: "is-the-function", expression: `request.userInfo.username == ${lit(id.username)} || ${lit(id.group)} in request.userInfo.groups` }];
}

/**
 * Writes of an owned kind (and its subresources), in the served namespaces or cluster-scoped:
 * elsewhere the namespace policy refuses the function whatever it writes.
 */
function ownershipPolicyOf(operator: Operator<unknown>, o: { functionsNamespace: string; namespaces: readonly string[] }): Manifest[] {
  if (operator.owns.length === 0) return [];
  const { group, kind } = operator.resource;
  const fn = operatorName(operator);
  const controllers = (obj: string) =>
    `${obj} == null || !has(${obj}.metadata.ownerReferences) ? [] : ${obj}.metadata.ownerReferences.filter(r, has(r.controller) && r.controller)`;
  const ours = (list: string) => `${list}.exists(r, r.kind == ${lit(kind)} && r.apiVersion.startsWith(${lit(`${group}/`)}))`;
  // A child's fence as CEL reads it; -1 when absent or not a number (core/fence.ts's fenceOf).
  const fence = (obj: string) => {
    const value = `${obj}.metadata.annotations[${lit(PARENT_GENERATION_ANNOTATION)}]`;
    return `${obj} != null && has(${obj}.metadata.annotations) && ${lit(PARENT_GENERATION_ANNOTATION)} in ${obj}.metadata.annotations && ${value}.matches('^[0-9]{1,18}$') ? int(${value}) : -1`;
  };
  const [staleHead, staleMid, staleStored, staleTail] = staleRefusal("\u0000", "\u0000", "\u0000", "\u0000").split("\u0000");
  // The messages are core/ownership.ts's, built in CEL: the runtime recognises them as ChildConflict.
  const [createHead, createTail] = refusal.create(fn, "\u0000", kind).split("\u0000");
  const [changeHead, changeMid, changeTail] = refusal.change(fn, "\u0000", "\u0000", kind).split("\u0000");
  const [otherHead, otherMid, otherUid, otherTail] = refusal.otherIncarnation(fn, "\u0000", "\u0000", kind, "\u0000").split("\u0000");
  const byGroup = new Map<string, Set<string>>();
  for (const k of operator.owns) byGroup.set(k.group, (byGroup.get(k.group) ?? new Set()).add(k.plural).add(`${k.plural}/*`));
  return policyAndBinding(admissionPolicyName(operator), {
    matchConstraints: {
      resourceRules: [...byGroup].map(([g, resources]) => ({ apiGroups: [g], apiVersions: ["*"], resources: [...resources].sort(), operations: WRITES })),
      // A cluster-scoped child is never skipped by a namespace selector.
      ...(o.namespaces.length > 0 ? namespaces("In", o.namespaces) : {}),
    },
    matchConditions: isTheFunction(operator, o.functionsNamespace),
    variables: [
      { name: "shared", expression: anyOf(operator.shares.map((s) => `${isResource(s.group, s.plural)} && request.name == ${lit(s.name)}`)) },
      { name: "adoptable", expression: anyOf(operator.owns.filter((k) => k.adopt).map((k) => isResource(k.group, k.plural))) },
      { name: "newControllers", expression: controllers("object") },
      { name: "oldControllers", expression: controllers("oldObject") },
      { name: "newIsOurs", expression: `${ours("variables.newControllers")} || (variables.shared && size(variables.newControllers) == 0)` },
      { name: "oldIsOurs", expression: ours("variables.oldControllers") },
      // The same parent is the same uid. The same name with another uid is another incarnation
      // (deleted and re-created): refused in words of its own, so the runtime reads the parent
      // to learn which of the two is live.
      { name: "sameUid", expression: "variables.oldControllers.exists(o, variables.newControllers.exists(n, n.uid == o.uid))" },
      { name: "otherIncarnation", expression: "variables.oldControllers.exists(o, variables.newControllers.exists(n, n.name == o.name && n.uid != o.uid))" },
      { name: "oldFence", expression: fence("oldObject") },
      { name: "newFence", expression: fence("object") },
    ],
    validations: [
      {
        expression: "request.operation == 'DELETE' || variables.newIsOurs",
        messageExpression: `${lit(createHead ?? "")} + request.resource.resource + ${lit(createTail ?? "")}`,
        reason: "Forbidden",
      },
      {
        expression:
          "request.operation == 'CREATE' || " +
          "(size(variables.oldControllers) == 0 && (variables.shared || (variables.adoptable && request.operation == 'UPDATE'))) || " +
          "(variables.oldIsOurs && (request.operation == 'DELETE' || variables.sameUid))",
        messageExpression:
          `variables.oldIsOurs && variables.otherIncarnation ? ` +
          `${lit(otherHead ?? "")} + request.resource.resource + ${lit(otherMid ?? "")} + request.name + ${lit(otherUid ?? "")} + ` +
          `oldObject.metadata.uid + ${lit(otherTail ?? "")} : ` +
          `${lit(changeHead ?? "")} + request.resource.resource + ${lit(changeMid ?? "")} + request.name + ${lit(changeTail ?? "")}`,
        reason: "Forbidden",
      },
      {
        // The fence: core/fence.ts's fenceVerdict. The runtime reads this refusal as a conflict.
        // A write that passed the rule above keeps its controller, so the fence holds for as long
        // as the child exists under that parent; only an orphan adopted or a shared object has none.
        expression: "request.operation != 'UPDATE' || variables.oldFence < 0 || !variables.sameUid || variables.newFence >= variables.oldFence",
        messageExpression:
          `${lit(staleHead ?? "")} + request.resource.resource + ${lit(staleMid ?? "")} + request.name + ${lit(staleStored ?? "")} + ` +
          `string(variables.oldFence) + ${lit(staleTail ?? "")} + string(variables.newFence)`,
        reason: "Forbidden",
      },
    ],
  });
}

/**
 * Any namespaced write of the function's where it may never write: a denied namespace, or one it
 * does not serve. The selector leaves out exactly the namespaces where both rules pass, so a
 * write there is not matched at all.
 */
function namespacePolicyOf(
  operator: Operator<unknown>,
  o: { functionsNamespace: string; namespaces: readonly string[]; denied: readonly string[] },
): Manifest[] {
  let selector: Manifest;
  if (o.namespaces.length === 0) {
    // Serving every namespace: only the denied ones are refused.
    if (o.denied.length === 0) return [];
    selector = namespaces("In", o.denied);
  } else {
    // Serving some: every namespace but those served and not denied (every one, if none is left).
    const writable = o.namespaces.filter((n) => !o.denied.includes(n));
    selector = writable.length > 0 ? namespaces("NotIn", writable) : {};
  }
  const who = `the ${operatorName(operator)} function`;
  const validations: Manifest[] = [
    {
      expression: `variables.requestNamespace == '' || !(variables.requestNamespace in ${list(o.denied)})`,
      messageExpression: `'crdfn: ${who} may never write in namespace ' + variables.requestNamespace`,
      reason: "Forbidden",
    },
  ];
  if (o.namespaces.length > 0) {
    validations.push({
      expression: `variables.requestNamespace == '' || variables.requestNamespace in ${list(o.namespaces)}`,
      messageExpression: `'crdfn: ${who} does not serve namespace ' + variables.requestNamespace`,
      reason: "Forbidden",
    });
  }
  return policyAndBinding(namespacePolicyName(operator), {
    matchConstraints: {
      resourceRules: [{ apiGroups: ["*"], apiVersions: ["*"], resources: ["*/*"], operations: WRITES, scope: "Namespaced" }],
      ...selector,
    },
    matchConditions: isTheFunction(operator, o.functionsNamespace),
    // Not "namespace": a CEL reserved word, refused as a variable name. A request without a
    // namespace key (a Namespace object's own) would make `request.namespace` an error, which
    // failurePolicy Fail turns into a denial.
    variables: [{ name: "requestNamespace", expression: "has(request.namespace) ? request.namespace : ''" }],
    validations,
  });
}

/**
 * Objects of a namespaced operator's kind may be created only in the namespaces it serves: one
 * elsewhere would never be reconciled (its bridge watches the served namespaces; its function may
 * write only there), so the API server says so when it is applied, to whoever applies it.
 */
export function servedNamespacesPolicyOf(operator: Operator<unknown>, namespaces: readonly string[]): Manifest[] {
  if (operator.resource.scope !== "Namespaced" || namespaces.length === 0) return [];
  const name = `crdfn-${operatorName(operator)}-namespaces`;
  const { group, plural, kind } = operator.resource;
  return [
    {
      apiVersion: "admissionregistration.k8s.io/v1",
      kind: "ValidatingAdmissionPolicy",
      metadata: { name },
      spec: {
        failurePolicy: "Fail",
        matchConstraints: { resourceRules: [{ apiGroups: [group], apiVersions: ["*"], resources: [plural], operations: ["CREATE"] }] },
        validations: [
          {
            expression: `request.namespace in ${list(namespaces)}`,
            messageExpression: `${lit(`crdfn: ${kind} objects are reconciled only in namespace${namespaces.length > 1 ? "s" : ""} ${namespaces.join(", ")}, not in `)} + request.namespace`,
            reason: "Forbidden",
          },
        ],
      },
    },
    {
      apiVersion: "admissionregistration.k8s.io/v1",
      kind: "ValidatingAdmissionPolicyBinding",
      metadata: { name },
      spec: { policyName: name, validationActions: ["Deny"] },
    },
  ];
}
