// The committed infra/ and infra/serverless/ are exactly what `crdfn generate` writes from the
// examples and crdfn.deploy.yaml; a hand edit (or a forgotten regeneration) fails `npm test`.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parse, parseAllDocuments } from "yaml";
import { bridgeConfigSchema } from "../bridge/config.ts";
import { ConfigError } from "../core/config-error.ts";
import { parseDeploySettings } from "../core/deploy-settings.ts";
import { deployFiles } from "../core/deploy-files.ts";
import { defineOperator } from "../core/operator.ts";
import { z } from "zod";
import { generate, staleFiles } from "./generate.ts";

const root = join(import.meta.dirname, "..");
const docs = (text: string) => parseAllDocuments(text).map((d) => d.toJS() as { kind: string; metadata: { name: string; namespace?: string }; rules?: unknown });

describe("crdfn generate", () => {
  it("wrote the committed infra/ and serverless resources: nothing is stale", async () => {
    const g = await generate([], { settings: "crdfn.deploy.yaml" }, root);
    assert.equal(g.outDir, join(root, "infra"));
    assert.deepEqual(staleFiles(g), [], "run: npm run generate");
  });

  it("catches a hand-edited file, a missing one and a left-over one", async () => {
    const g = await generate([], { settings: "crdfn.deploy.yaml" }, root);
    const copy = mkdtempSync(join(tmpdir(), "crdfn-gen-"));
    try {
      cpSync(g.outDir, copy, { recursive: true });
      const edited = join(copy, "functions", "greeting.yaml");
      // The edit issue 10 found: a broader grant slipped in by hand.
      writeFileSync(edited, readFileSync(edited, "utf8").replace("      - delete\n", "      - delete\n      - list\n"));
      rmSync(join(copy, "serverless", "resources.yml"));
      writeFileSync(join(copy, "functions", "old-operator.yaml"), "kind: ClusterRole\n");
      assert.deepEqual(staleFiles({ ...g, outDir: copy }), ["functions/greeting.yaml (differs)", "functions/old-operator.yaml (not generated)", "serverless/resources.yml (missing)"]);
    } finally {
      rmSync(copy, { recursive: true, force: true });
    }
  });

  it("writes a bridge ConfigMap the bridge accepts, each resource sent to its operator's queue", async () => {
    const g = await generate([], { settings: "crdfn.deploy.yaml" }, root);
    const [cm] = docs(g.files.get("bridge/configmap.yaml")!) as unknown as Array<{ data: Record<string, string> }>;
    const config = bridgeConfigSchema.parse(parse(cm!.data["bridge.yaml"]!));
    assert.deepEqual(config.resources.map((r) => [r.plural, r.queueUrl]), [
      ["greetings", "https://sqs.us-east-1.amazonaws.com/000000000000/crdfn-prod-greeting.fifo"],
      ["crontabs", "https://sqs.us-east-1.amazonaws.com/000000000000/crdfn-prod-crontab.fifo"],
    ]);
  });

  const widget = defineOperator({
    resource: { group: "shop.example.com", version: "v1", plural: "widgets", kind: "Widget" },
    spec: z.object({ size: z.number() }),
    owns: [
      { group: "", version: "v1", kind: "Secret" },
      { group: "rbac.authorization.k8s.io", version: "v1", kind: "ClusterRole", namespaced: false },
    ],
    reconcile: () => ({}),
  });

  it("scopes the grants to the served namespaces: Roles there, a ClusterRole only for declared cluster-scoped kinds", () => {
    const settings = parseDeploySettings({ namespaces: ["shop", "shop-staging"] }, "test");
    const files = deployFiles([{ operator: widget, handler: "src/lambda.handler" }], settings);
    const objects = docs(files.get("functions/widget.yaml")!);
    assert.deepEqual(objects.map((o) => `${o.kind} ${o.metadata.namespace ?? ""}/${o.metadata.name}`), [
      "ServiceAccount crdfn-functions/crdfn-widget",
      "ClusterRole /crdfn-widget-function-cluster",
      "ClusterRoleBinding /crdfn-widget-function-cluster",
      "Role shop/crdfn-widget-function",
      "RoleBinding shop/crdfn-widget-function",
      "Role shop-staging/crdfn-widget-function",
      "RoleBinding shop-staging/crdfn-widget-function",
    ]);
    assert.deepEqual(objects[1]!.rules, [{ apiGroups: ["rbac.authorization.k8s.io"], resources: ["clusterroles"], verbs: ["get", "list", "create", "patch", "delete"] }]);
    // No finalizer declared: no patch on its own resource. Secrets only because it owns them.
    assert.deepEqual(objects[3]!.rules, [
      { apiGroups: ["shop.example.com"], resources: ["widgets"], verbs: ["get"] },
      { apiGroups: ["shop.example.com"], resources: ["widgets/status"], verbs: ["update"] },
      { apiGroups: ["shop.example.com"], resources: ["widgets/finalizers"], verbs: ["update"] },
      { apiGroups: [""], resources: ["secrets"], verbs: ["get", "list", "create", "patch", "delete"] },
      { apiGroups: ["events.k8s.io"], resources: ["events"], verbs: ["create", "get", "patch"] },
    ]);
    const bridge = docs(files.get("bridge/watch-rbac.yaml")!);
    assert.deepEqual(bridge.map((o) => `${o.kind} ${o.metadata.namespace ?? ""}/${o.metadata.name}`), [
      "ClusterRole /crdfn-bridge-cluster",
      "ClusterRoleBinding /crdfn-bridge-cluster",
      "Role shop/crdfn-bridge",
      "RoleBinding shop/crdfn-bridge",
      "Role shop-staging/crdfn-bridge",
      "RoleBinding shop-staging/crdfn-bridge",
    ]);
  });

  it("reports a bad setting in one line naming it", () => {
    assert.throws(() => parseDeploySettings({ namespaces: ["Shop"] }, "crdfn.deploy.yaml"), (e: Error) => e instanceof ConfigError && /^crdfn\.deploy\.yaml: namespaces\.0: must be a lower-case DNS label$/.test(e.message));
    assert.throws(() => parseDeploySettings({ namespaces: ["kube-system"] }, "flags"), /flags: namespaces: kube-system is never served/);
    assert.throws(() => parseDeploySettings({ queues: { urlBase: "nope" } }, "flags"), /^ConfigError|flags: queues\.urlBase: must be a URL/);
    assert.throws(() => parseDeploySettings({ clutser: "x" }, "s.yaml"), /s\.yaml: \(top\): Unrecognized key/);
  });
});
