// What RBAC cannot say, the API server enforces with a ValidatingAdmissionPolicy (CEL, GA since
// Kubernetes 1.30) per operator, matching only that operator's function identity:
//   * never a write in kube-system, the bridge's or the functions' namespace, nor in a namespace
//     the operator does not serve;
//   * an object of an owned kind may be created, changed or deleted only when it (and, on change
//     or delete, the object already stored) carries a controller owner reference to the
//     operator's kind — so neither a forged object nor a take-over of someone else's passes;
//     the operator's declared shared objects (by name) are the exception, and only while no
//     controller owns them.
import type { Operator } from "./operator.ts";
import { functionIdentity, operatorName } from "./operator-rbac.ts";

type Manifest = Record<string, unknown>;

/** A CEL string literal. */
const lit = (s: string): string => `'${s.replace(/\\/g, "\\\\").replace(/'/g, "\\'")}'`;
const list = (xs: readonly string[]): string => `[${xs.map(lit).join(", ")}]`;
const anyOf = (xs: string[]): string => (xs.length === 0 ? "false" : xs.map((x) => `(${x})`).join(" || "));
const isResource = (group: string, plural: string): string => `request.resource.group == ${lit(group)} && request.resource.resource == ${lit(plural)}`;

/** The policy's (and its binding's) name. */
export const admissionPolicyName = (operator: Operator<unknown>): string => `crdfn-${operatorName(operator)}-function`;

export function admissionPolicyOf(operator: Operator<unknown>, o: { functionsNamespace: string; namespaces: readonly string[]; denied: readonly string[] }): Manifest[] {
  const id = functionIdentity(operator, o.functionsNamespace);
  const who = `the ${operatorName(operator)} function`;
  const { group, kind } = operator.resource;
  const controlledBy = (obj: string) =>
    `has(${obj}.metadata.ownerReferences) && ${obj}.metadata.ownerReferences.exists(r, has(r.controller) && r.controller && r.kind == ${lit(kind)} && r.apiVersion.startsWith(${lit(`${group}/`)}))`;
  const uncontrolled = (obj: string) => `!(has(${obj}.metadata.ownerReferences) && ${obj}.metadata.ownerReferences.exists(r, has(r.controller) && r.controller))`;
  const name = admissionPolicyName(operator);
  // A cluster-scoped request (its own cluster-scoped resource's status, a cluster-scoped child)
  // carries no namespace key at all: reading request.namespace there is an error, which
  // failurePolicy Fail turns into a denial. The namespace checks apply to namespaced requests only.
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
  validations.push(
    {
      expression: "!variables.owned || request.operation == 'DELETE' || variables.newIsOurs",
      messageExpression: `'crdfn: ${who} may write ' + request.resource.resource + ' only with a controller owner reference to its ${kind}'`,
      reason: "Forbidden",
    },
    {
      expression: "!variables.owned || request.operation == 'CREATE' || variables.oldIsOurs",
      messageExpression: `'crdfn: ${who} may change or delete ' + request.resource.resource + ' ' + request.name + ' only if a ${kind} already controls it'`,
      reason: "Forbidden",
    },
  );
  const policy: Manifest = {
    apiVersion: "admissionregistration.k8s.io/v1",
    kind: "ValidatingAdmissionPolicy",
    metadata: { name },
    spec: {
      failurePolicy: "Fail",
      matchConstraints: {
        resourceRules: [{ apiGroups: ["*"], apiVersions: ["*"], resources: ["*/*"], operations: ["CREATE", "UPDATE", "DELETE"] }],
      },
      // Only this function's identities: the ServiceAccount and the Lambda role's group.
      matchConditions: [{ name: "is-the-function", expression: `request.userInfo.username == ${lit(id.username)} || ${lit(id.group)} in request.userInfo.groups` }],
      variables: [
        // Not "namespace": a CEL reserved word, refused as a variable name.
        { name: "requestNamespace", expression: "has(request.namespace) ? request.namespace : ''" },
        { name: "owned", expression: anyOf(operator.owns.map((k) => isResource(k.group, k.plural))) },
        { name: "shared", expression: anyOf(operator.shares.map((s) => `${isResource(s.group, s.plural)} && request.name == ${lit(s.name)}`)) },
        { name: "newIsOurs", expression: `(${controlledBy("object")}) || (variables.shared && ${uncontrolled("object")})` },
        { name: "oldIsOurs", expression: `(${controlledBy("oldObject")}) || (variables.shared && ${uncontrolled("oldObject")})` },
      ],
      validations,
    },
  };
  const binding: Manifest = {
    apiVersion: "admissionregistration.k8s.io/v1",
    kind: "ValidatingAdmissionPolicyBinding",
    metadata: { name },
    spec: { policyName: name, validationActions: ["Deny"] },
  };
  return [policy, binding];
}
