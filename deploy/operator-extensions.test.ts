// What `reads`, `effects`, `every` and `cloud` declare, and what crdfn generates from them: the
// CRD's status schema, the function's grants, the bridge's watch and grants, the function's IAM.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { z } from "zod";
import { watchedResourcesOf, bridgeWatchRbacOf } from "./bridge.ts";
import { ConfigError } from "../core/config-error.ts";
import { parseDeploySettings, type LambdaDeploySettings } from "./settings.ts";
import { deployFiles } from "./files.ts";
import { statusSchemaOf } from "./crd.ts";
import { rbacRulesByScope } from "./rbac.ts";
import { defineOperator, type Operator } from "../core/operator.ts";
import { serverlessResourcesOf } from "./serverless.ts";

const resource = { group: "example.com", version: "v1", plural: "apps", kind: "App" };
const spec = z.object({ secretRef: z.string().optional() });
const app = defineOperator({
  resource,
  spec,
  status: z.object({ phase: z.string() }),
  reads: [{ group: "", version: "v1", kind: "Secret", field: "spec.secretRef" }],
  reconcile: () => ({ status: { phase: "Ready" } }),
}) as Operator<unknown>;
const settings = parseDeploySettings(
  {
    project: "shop",
    cluster: "prod",
    namespaces: ["shop"],
    bridge: { image: "registry.example.com/b:1" },
    queues: { urlBase: "https://sqs.us-east-1.amazonaws.com/123456789012" },
  },
  "test",
) as LambdaDeploySettings;

describe("defineOperator: reads, effects, every, cloud", () => {
  it("fills a read kind's plural and scope", () => {
    assert.deepEqual(
      app.reads.map((r) => [r.kind, r.plural, r.namespaced]),
      [["Secret", "secrets", true]],
    );
  });

  it("refuses what cannot work, naming the setting", () => {
    const base = { resource, spec, reconcile: () => ({}) };
    assert.throws(
      () => defineOperator({ ...base, reads: [{ group: "", version: "v1", kind: "Secret" }] }),
      /App reads\[0\] \(Secret\): give either name .* or field/,
    );
    assert.throws(
      () => defineOperator({ ...base, reads: [{ group: "", version: "v1", kind: "Secret", field: "spec[0]" }] }),
      /field "spec\[0\]" must be a dotted path/,
    );
    assert.throws(
      () =>
        defineOperator({
          ...base,
          reads: [
            { group: "", version: "v1", kind: "Secret", field: "spec.a" },
            { group: "", version: "v1", kind: "Secret", name: () => "b" },
          ],
        }),
      /Secret is listed twice/,
    );
    assert.throws(
      () =>
        defineOperator({
          ...base,
          status: z.object({ references: z.array(z.string()) }),
          reads: [{ group: "", version: "v1", kind: "Secret", field: "spec.a" }],
        }),
      /App status: "references" is the runtime's own status field/,
    );
    assert.throws(() => defineOperator({ ...base, every: 0 }), /App: every must be a whole number of seconds from 1 to 604800/);
    assert.throws(() => defineOperator({ ...base, effects: () => Promise.resolve() }), /App: effects need a finalizer and finalize/);
    assert.throws(
      () => defineOperator({ ...base, cloud: { aws: [{ actions: ["CreateQueue"], resources: ["*"] }] } }),
      /App cloud\.aws\[0\]: "CreateQueue" is not an IAM action/,
    );
    assert.throws(
      () => defineOperator({ ...base, cloud: { aws: [{ actions: ["sqs:CreateQueue"], resources: [] }] } }),
      /App cloud\.aws\[0\]: resources must list the ARNs/,
    );
  });
});

describe("generated from reads", () => {
  it("the CRD's status holds the runtime's references list", () => {
    const properties = statusSchemaOf(app).properties as Record<string, { type?: string; items?: { required?: string[] } }>;
    assert.equal(properties.references?.type, "array");
    assert.deepEqual(properties.references?.items?.required, ["apiVersion", "kind", "name"]);
  });

  it("the function may list an owned kind only when it is marked list: true (parents of thousands of children)", () => {
    const owning = (list?: boolean) =>
      defineOperator({
        resource,
        spec,
        owns: [{ group: "", version: "v1", kind: "ConfigMap", ...(list === undefined ? {} : { list }) }],
        reconcile: () => ({}),
      }) as Operator<unknown>;
    const verbs = (op: Operator<unknown>) =>
      rbacRulesByScope(op)
        .namespaced.filter((r) => r.resources.includes("configmaps"))
        .flatMap((r) => r.verbs)
        .sort();
    assert.deepEqual(verbs(owning()), ["create", "delete", "patch"]);
    assert.deepEqual(verbs(owning(true)), ["create", "delete", "list", "patch"]);
    assert.throws(
      () => defineOperator({ resource, spec, status: z.object({ reconciled: z.string() }), reconcile: () => ({}) }),
      /App status: "reconciled" is the runtime's own status field/,
    );
  });

  it("the function may get the referenced kind in the served namespaces, and nothing more of it", () => {
    const { namespaced, cluster } = rbacRulesByScope(app);
    assert.deepEqual(
      namespaced.filter((r) => r.resources.includes("secrets")),
      [{ apiGroups: [""], resources: ["secrets"], verbs: ["get"] }],
    );
    assert.deepEqual(cluster, []);
  });

  it("the bridge watches the referenced kind, and may list and watch it only in the served namespaces", () => {
    assert.deepEqual(watchedResourcesOf([app])[0]?.reads, [{ group: "", version: "v1", plural: "secrets" }]);
    const rbac = bridgeWatchRbacOf([app], settings) as Array<{
      kind: string;
      metadata: { namespace?: string };
      rules?: Array<{ resources: string[]; verbs: string[] }>;
    }>;
    assert.deepEqual(
      rbac.map((o) => `${o.kind} ${o.metadata.namespace ?? ""}`),
      ["Role shop", "RoleBinding shop"],
    );
    assert.deepEqual(rbac[0]!.rules!.find((r) => r.resources.includes("secrets"))?.verbs, ["get", "list", "watch"]);
  });

  it("a cluster-scoped operator that reads a namespaced kind needs named namespaces too", () => {
    const node = defineOperator({
      resource: { ...resource, plural: "nodes", kind: "NodeThing", scope: "Cluster" },
      spec: z.object({}),
      reads: [{ group: "", version: "v1", kind: "Secret", name: () => ({ namespace: "shop", name: "x" }) }],
      reconcile: () => ({}),
    });
    assert.throws(
      () => deployFiles([{ operator: node, handler: "lambda.handler" }], { ...settings, namespaces: [] }),
      (e: Error) => e instanceof ConfigError && /NodeThing reads namespaced kinds/.test(e.message),
    );
  });
});

type Stack = { Resources: Record<string, { Properties: { Policies: Array<{ PolicyDocument: { Statement: unknown[] } }> } }> };

describe("generated from cloud", () => {
  it("the function's role gets the declared statements, an ARN with pseudo parameters through Fn::Sub", () => {
    const queue = defineOperator({
      resource,
      spec,
      cloud: {
        aws: [
          {
            actions: ["sqs:CreateQueue", "sqs:DeleteQueue"],
            resources: ["arn:${AWS::Partition}:sqs:${AWS::Region}:${AWS::AccountId}:app-*", "arn:aws:sqs:us-east-1:123456789012:fixed"],
          },
        ],
      },
      reconcile: () => ({}),
    }) as Operator<unknown>;
    const { Resources } = serverlessResourcesOf([queue], settings) as Stack;
    const statements = Resources.AppFunctionRole!.Properties.Policies[0]!.PolicyDocument.Statement;
    assert.deepEqual(statements.at(-1), {
      Effect: "Allow",
      Action: ["sqs:CreateQueue", "sqs:DeleteQueue"],
      Resource: [{ "Fn::Sub": "arn:${AWS::Partition}:sqs:${AWS::Region}:${AWS::AccountId}:app-*" }, "arn:aws:sqs:us-east-1:123456789012:fixed"],
    });
    // Nothing declared: the role is what crdfn itself needs, as before (its logs, its queue, its re-sends, its key secret).
    const plain = serverlessResourcesOf([app], settings) as Stack;
    assert.equal(plain.Resources.AppFunctionRole!.Properties.Policies[0]!.PolicyDocument.Statement.length, 4);
  });
});
