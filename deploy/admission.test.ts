import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { z } from "zod";
import { admissionPolicyName, admissionPolicyOf, namespacePolicyName } from "./admission.ts";
import { defineOperator } from "../core/operator.ts";
import { PARENT_GENERATION_ANNOTATION } from "../core/event.ts";
import { STALE_GENERATION_TOKEN } from "../core/fence.ts";

const authorizedKey = defineOperator({
  resource: { group: "keys.example.com", version: "v1", plural: "authorizedkeys", kind: "AuthorizedKey", scope: "Cluster" },
  spec: z.object({ key: z.string() }),
  owns: [{ group: "", version: "v1", kind: "ConfigMap" }],
  reconcile: () => ({}),
});

type Selector = { matchExpressions: Array<{ key: string; operator: "In" | "NotIn"; values: string[] }> };
type Policy = {
  kind: string;
  metadata: { name: string };
  spec: {
    matchConstraints: { resourceRules: Array<{ apiGroups: string[]; resources: string[]; scope?: string }>; namespaceSelector?: Selector };
    variables: Array<{ name: string; expression: string }>;
    validations: Array<{ expression: string; messageExpression: string }>;
  };
};
const policies = (o: Parameters<typeof admissionPolicyOf>[1]) =>
  (admissionPolicyOf(authorizedKey, o) as unknown as Policy[]).filter((m) => m.kind === "ValidatingAdmissionPolicy");
const named = (o: Parameters<typeof admissionPolicyOf>[1], name: string) => policies(o).find((p) => p.metadata.name === name);

describe("admission policy", () => {
  it("reads the request's namespace only where it has one: a cluster-scoped request carries none", () => {
    const policy = named(
      { functionsNamespace: "crdfn-functions", namespaces: ["keys"], denied: ["kube-system", "crdfn-system", "crdfn-functions"] },
      namespacePolicyName(authorizedKey),
    );
    const { variables, validations } = policy!.spec;
    assert.deepEqual(
      variables.find((v) => v.name === "requestNamespace"),
      { name: "requestNamespace", expression: "has(request.namespace) ? request.namespace : ''" },
    );
    // Everything else goes through the variable: `request.namespace` alone fails with "no such key".
    const elsewhere = [
      ...variables.filter((v) => v.name !== "requestNamespace").map((v) => v.expression),
      ...validations.flatMap((v) => [v.expression, v.messageExpression]),
    ];
    assert.deepEqual(
      elsewhere.filter((e) => e.includes("request.namespace")),
      [],
    );
    // A request without a namespace passes both checks; the policy selects namespaced requests only.
    assert.deepEqual(
      validations.map((v) => v.expression.startsWith("variables.requestNamespace == '' || ")),
      [true, true],
    );
    assert.deepEqual(
      policy!.spec.matchConstraints.resourceRules.map((r) => r.scope),
      ["Namespaced"],
    );
  });

  it("fences children: an update may not lower crdfn.io/parent-generation under the same parent uid, refused in words starting with the runtime's token", () => {
    const policy = named({ functionsNamespace: "crdfn-functions", namespaces: ["keys"], denied: [] }, admissionPolicyName(authorizedKey));
    const { variables, validations } = policy!.spec;
    const fence = validations.find((v) => v.expression.includes("variables.oldFence"))!;
    assert.equal(fence.expression, "request.operation != 'UPDATE' || variables.oldFence < 0 || !variables.sameUid || variables.newFence >= variables.oldFence");
    assert.ok(fence.messageExpression.startsWith(`'${STALE_GENERATION_TOKEN}: ' + request.resource.resource`), fence.messageExpression);
    for (const name of ["oldFence", "newFence"])
      assert.ok(variables.find((v) => v.name === name)?.expression.includes(`'${PARENT_GENERATION_ANNOTATION}' in `), name);
    assert.equal(
      variables.find((v) => v.name === "sameUid")?.expression,
      "variables.oldControllers.exists(o, variables.newControllers.exists(n, n.uid == o.uid))",
    );
  });

  it("selects only the owned kinds for the ownership rules: the function's status writes and Events are not its business", () => {
    const policy = named({ functionsNamespace: "crdfn-functions", namespaces: [], denied: ["kube-system"] }, admissionPolicyName(authorizedKey));
    assert.deepEqual(
      policy!.spec.matchConstraints.resourceRules.map((r) => [r.apiGroups, r.resources]),
      [[[""], ["configmaps", "configmaps/*"]]],
    );
    assert.equal(policy!.spec.matchConstraints.namespaceSelector, undefined);
  });

  // The namespace policy's selector may leave a namespace out only where both of its rules pass,
  // as the rules read (deploy/admission.ts): never in a denied namespace; only in a served one, when any are.
  it("leaves out of the namespace policy exactly the namespaces where the function may write, for any served and denied lists", () => {
    const universe = ["a", "b", "c", "d", "kube-system"];
    let rng = 7;
    const pick = () => universe.filter(() => ((rng = (rng * 1103515245 + 12345) % 2 ** 31), rng % 3 === 0));
    for (let i = 0; i < 300; i++) {
      const [namespaces, denied] = [pick(), pick()];
      const policy = named({ functionsNamespace: "crdfn-functions", namespaces, denied }, namespacePolicyName(authorizedKey));
      for (const n of universe) {
        const allowed = !denied.includes(n) && (namespaces.length === 0 || namespaces.includes(n));
        const rule = policy?.spec.matchConstraints.namespaceSelector?.matchExpressions[0];
        const selected = policy !== undefined && (rule === undefined || (rule.operator === "In") === rule.values.includes(n));
        assert.equal(selected, !allowed, `served ${JSON.stringify(namespaces)}, denied ${JSON.stringify(denied)}: ${n}`);
      }
    }
  });
});
