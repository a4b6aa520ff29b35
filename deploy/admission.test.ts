import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { z } from "zod";
import { admissionPolicyOf } from "./admission.ts";
import { defineOperator } from "../core/operator.ts";
import { PARENT_GENERATION_ANNOTATION } from "../core/event.ts";
import { STALE_GENERATION_TOKEN } from "../core/fence.ts";

const authorizedKey = defineOperator({
  resource: { group: "keys.example.com", version: "v1", plural: "authorizedkeys", kind: "AuthorizedKey", scope: "Cluster" },
  spec: z.object({ key: z.string() }),
  owns: [{ group: "", version: "v1", kind: "ConfigMap" }],
  reconcile: () => ({}),
});

type Policy = { spec: { variables: Array<{ name: string; expression: string }>; validations: Array<{ expression: string; messageExpression: string }> } };

describe("admission policy", () => {
  it("reads the request's namespace only where it has one: a cluster-scoped request carries none", () => {
    const [policy] = admissionPolicyOf(authorizedKey, {
      functionsNamespace: "crdfn-functions",
      namespaces: ["keys"],
      denied: ["kube-system", "crdfn-system", "crdfn-functions"],
    }) as unknown as Policy[];
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
    // A cluster-scoped request (namespace '') passes both namespace checks; the ownership checks still apply.
    assert.deepEqual(
      validations.slice(0, 2).map((v) => v.expression.startsWith("variables.requestNamespace == '' || ")),
      [true, true],
    );
  });

  it("fences children: an update may not lower crdfn.io/parent-generation under the same parent uid, refused in words starting with the runtime's token", () => {
    const [policy] = admissionPolicyOf(authorizedKey, { functionsNamespace: "crdfn-functions", namespaces: ["keys"], denied: [] }) as unknown as Policy[];
    const { variables, validations } = policy!.spec;
    const fence = validations.find((v) => v.expression.includes("variables.oldFence"))!;
    assert.equal(
      fence.expression,
      "!variables.owned || request.operation != 'UPDATE' || variables.oldFence < 0 || !variables.sameUid || variables.newFence >= variables.oldFence",
    );
    assert.ok(fence.messageExpression.startsWith(`'${STALE_GENERATION_TOKEN}: ' + request.resource.resource`), fence.messageExpression);
    for (const name of ["oldFence", "newFence"])
      assert.ok(variables.find((v) => v.name === name)?.expression.includes(`'${PARENT_GENERATION_ANNOTATION}' in `), name);
    assert.equal(
      variables.find((v) => v.name === "sameUid")?.expression,
      "variables.oldControllers.exists(o, variables.newControllers.exists(n, n.uid == o.uid))",
    );
  });
});
