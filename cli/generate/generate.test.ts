// The committed infra/generated/ is exactly what `crdfn generate` writes from the examples and
// crdfn.deploy.yaml, and nothing else; a hand edit (or a forgotten regeneration) fails `npm test`.
import { describe, it, after } from "node:test";
import assert from "node:assert/strict";
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { parse, parseAllDocuments } from "yaml";
import { bridgeConfigSchema } from "../../bridge/config.ts";
import { ConfigError } from "../../core/config-error.ts";
import { parseDeploySettings, type DeploySettingsInput, type LambdaDeploySettings } from "../../deploy/settings.ts";
import { deployFiles } from "../../deploy/files.ts";
import { defineOperator } from "../../core/operator.ts";
import { SetupError } from "../../emulator/errors.ts";
import { z } from "zod";
import { generate, servedNamespacesLine, staleFiles } from "./generate.ts";

const root = join(import.meta.dirname, "..", "..");
const docs = (text: string) =>
  parseAllDocuments(text).map((d) => d.toJS() as { kind: string; metadata: { name: string; namespace?: string }; rules?: unknown });
/** The values crdfn cannot know, given; the rest defaulted. */
const known = {
  project: "shop",
  cluster: "prod",
  namespaces: ["shop"],
  bridge: { image: "registry.example.com/shop/bridge:1" },
  queues: { urlBase: "https://sqs.eu-west-1.amazonaws.com/123456789012" },
};
const settingsOf = (extra: DeploySettingsInput = {}) => parseDeploySettings({ ...known, ...extra }, "test") as LambdaDeploySettings;

describe("crdfn generate", () => {
  it("wrote the committed infra/generated/: nothing is stale, and nothing there is written by hand", async () => {
    const g = await generate([], { settings: "crdfn.deploy.yaml" }, root);
    assert.equal(g.outDir, join(root, "infra", "generated"));
    assert.deepEqual(staleFiles(g), [], "run: npm run generate");
    const committed = readdirSync(g.outDir, { recursive: true, withFileTypes: true })
      .filter((e) => e.isFile())
      .map((e) => relative(g.outDir, join(e.parentPath, e.name)));
    assert.deepEqual(committed.sort(), [...g.files.keys()].sort());
  });

  it("catches a hand-edited file, a missing one and a left-over one", async () => {
    const g = await generate([], { settings: "crdfn.deploy.yaml" }, root);
    const copy = mkdtempSync(join(tmpdir(), "crdfn-gen-"));
    try {
      cpSync(g.outDir, copy, { recursive: true });
      const edited = join(copy, "functions", "greeting.yaml");
      // A broader grant slipped in by hand.
      writeFileSync(edited, readFileSync(edited, "utf8").replace("      - delete\n", "      - delete\n      - list\n"));
      rmSync(join(copy, "serverless", "resources.yml"));
      writeFileSync(join(copy, "functions", "old-operator.yaml"), "kind: ClusterRole\n");
      assert.deepEqual(staleFiles({ ...g, outDir: copy }), [
        "functions/greeting.yaml (differs)",
        "functions/old-operator.yaml (not generated)",
        "serverless/resources.yml (missing)",
      ]);
    } finally {
      rmSync(copy, { recursive: true, force: true });
    }
  });

  it("writes a bridge ConfigMap the bridge accepts, each resource sent to its operator's queue", async () => {
    const g = await generate([], { settings: "crdfn.deploy.yaml" }, root);
    const [cm] = docs(g.files.get("bridge/configmap.yaml")!) as unknown as Array<{ data: Record<string, string> }>;
    const config = bridgeConfigSchema.parse(parse(cm!.data["bridge.yaml"]!));
    assert.deepEqual(
      config.resources.map((r) => [r.plural, r.queueUrl]),
      [
        ["greetings", "https://sqs.us-east-1.amazonaws.com/123456789012/crdfn-prod-greeting.fifo"],
        ["crontabs", "https://sqs.us-east-1.amazonaws.com/123456789012/crdfn-prod-crontab.fifo"],
        ["queues", "https://sqs.us-east-1.amazonaws.com/123456789012/crdfn-prod-queue.fifo"],
      ],
    );
    assert.deepEqual(config.lease, { name: "crdfn-bridge-examples", namespace: "crdfn-system", durationSeconds: 8 });
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
    const settings = settingsOf({ namespaces: ["shop", "shop-staging"] });
    const files = deployFiles([{ operator: widget, handler: "src/lambda.handler" }], settings);
    const objects = docs(files.get("functions/widget.yaml")!);
    assert.deepEqual(
      objects.map((o) => `${o.kind} ${o.metadata.namespace ?? ""}/${o.metadata.name}`),
      [
        "ServiceAccount crdfn-functions/crdfn-widget",
        "ClusterRole /crdfn-widget-function-cluster",
        "ClusterRoleBinding /crdfn-widget-function-cluster",
        "Role shop/crdfn-widget-function",
        "RoleBinding shop/crdfn-widget-function",
        "Role shop-staging/crdfn-widget-function",
        "RoleBinding shop-staging/crdfn-widget-function",
      ],
    );
    assert.deepEqual(objects[1]!.rules, [{ apiGroups: ["rbac.authorization.k8s.io"], resources: ["clusterroles"], verbs: ["create", "patch", "delete"] }]);
    // No finalizer declared: no patch on its own resource. Secrets only because it owns them, and
    // no get or list of them: it does not observe them, so it cannot read a Secret it does not control.
    assert.deepEqual(objects[3]!.rules, [
      { apiGroups: ["shop.example.com"], resources: ["widgets"], verbs: ["get"] },
      { apiGroups: ["shop.example.com"], resources: ["widgets/status"], verbs: ["update"] },
      { apiGroups: ["shop.example.com"], resources: ["widgets/finalizers"], verbs: ["update"] },
      { apiGroups: [""], resources: ["secrets"], verbs: ["create", "patch", "delete"] },
      { apiGroups: ["events.k8s.io"], resources: ["events"], verbs: ["create", "get", "patch"] },
    ]);
    const bridge = docs(files.get("bridge/watch-rbac.yaml")!);
    assert.deepEqual(
      bridge.map((o) => `${o.kind} ${o.metadata.namespace ?? ""}/${o.metadata.name}`),
      [
        "ClusterRole /crdfn-bridge-shop-cluster",
        "ClusterRoleBinding /crdfn-bridge-shop-cluster",
        "Role shop/crdfn-bridge-shop",
        "RoleBinding shop/crdfn-bridge-shop",
        "Role shop-staging/crdfn-bridge-shop",
        "RoleBinding shop-staging/crdfn-bridge-shop",
      ],
    );
  });

  it("names every bridge object for its project: two projects' files share nothing but the namespaces", () => {
    const gadget = defineOperator({
      resource: { group: "toys.example.com", version: "v1", plural: "gadgets", kind: "Gadget" },
      spec: z.object({}),
      reconcile: () => ({}),
    });
    const manifestKey = (o: { kind: string; metadata: { name: string; namespace?: string } }) => `${o.kind} ${o.metadata.namespace ?? ""}/${o.metadata.name}`;
    const objects = (files: Map<string, string>) =>
      [...files].filter(([f]) => f.endsWith(".yaml") && !f.endsWith("kustomization.yaml")).flatMap(([, text]) => docs(text).map(manifestKey));
    const shop = objects(deployFiles([{ operator: widget, handler: "lambda.handler" }], settingsOf()));
    const toys = objects(deployFiles([{ operator: gadget, handler: "lambda.handler" }], settingsOf({ project: "toys" })));
    assert.deepEqual(shop.filter((k) => toys.includes(k)).sort(), ["Namespace /crdfn-functions", "Namespace /crdfn-system"]);
    assert.ok(toys.includes("Deployment crdfn-system/crdfn-bridge-toys") && toys.includes("ConfigMap crdfn-system/crdfn-bridge-toys"), toys.join("\n"));
    const [deployment] = docs(
      deployFiles([{ operator: gadget, handler: "lambda.handler" }], settingsOf({ project: "toys" })).get("bridge/deployment.yaml")!,
    ) as unknown as Array<{ spec: { selector: unknown } }>;
    assert.deepEqual(deployment!.spec.selector, { matchLabels: { "app.kubernetes.io/name": "crdfn-bridge", "app.kubernetes.io/instance": "toys" } });
  });

  it("writes no served Namespace (kubectl delete -k would delete it and the user's objects in it) and says each must exist", () => {
    const s = settingsOf({ namespaces: ["shop", "toys"] });
    const files = deployFiles([{ operator: widget, handler: "lambda.handler" }], s);
    const namespaces = [...files]
      .filter(([f]) => f.endsWith(".yaml"))
      .flatMap(([, text]) => docs(text))
      .filter((o) => o.kind === "Namespace")
      .map((o) => o.metadata.name);
    assert.deepEqual(namespaces.sort(), ["crdfn-functions", "crdfn-system"], "only crdfn's own namespaces");
    assert.match(servedNamespacesLine(s)!, /^the served namespaces \(shop, toys\) must exist before kubectl apply -k: crdfn does not write them/);
    assert.equal(servedNamespacesLine(settingsOf({ namespaces: [] })), undefined);
  });

  it("generates per operator one FIFO event queue and its DLQ, no requeue queue; the bridge's role sends to exactly those queues", () => {
    const files = deployFiles([{ operator: widget, handler: "lambda.handler" }], settingsOf());
    const { Resources: r } = parse(files.get("serverless/resources.yml")!) as {
      Resources: Record<string, { Type: string; Properties: Record<string, unknown> }>;
    };
    assert.deepEqual(Object.keys(r).sort(), ["BridgePodIdentity", "BridgeRole", "WidgetEventsDlq", "WidgetEventsQueue", "WidgetFunctionRole"]);
    assert.equal(r.WidgetEventsQueue!.Properties.QueueName, "crdfn-shop-widget.fifo");
    assert.equal(r.WidgetEventsDlq!.Properties.QueueName, "crdfn-shop-widget-dlq.fifo");
    assert.doesNotMatch(files.get("serverless/resources.yml")! + files.get("serverless/functions.yml")!, /requeue|STANDARD_QUEUE/i);
    assert.deepEqual(r.BridgeRole!.Properties.Policies, [
      {
        PolicyName: "publish",
        PolicyDocument: {
          Version: "2012-10-17",
          Statement: [{ Effect: "Allow", Action: ["sqs:SendMessage", "sqs:GetQueueAttributes"], Resource: [{ "Fn::GetAtt": ["WidgetEventsQueue", "Arn"] }] }],
        },
      },
    ]);
    assert.deepEqual(r.BridgePodIdentity!.Properties, {
      ClusterName: "${param:eksCluster}",
      Namespace: "crdfn-system",
      ServiceAccount: "crdfn-bridge-shop",
      RoleArn: { "Fn::GetAtt": ["BridgeRole", "Arn"] },
    });
  });

  it("reports a bad setting in one line naming it", () => {
    assert.throws(
      () => settingsOf({ namespaces: ["Shop"] }),
      (e: Error) => e instanceof ConfigError && /^test: namespaces\.0: must be a lower-case DNS label$/.test(e.message),
    );
    assert.throws(() => settingsOf({ namespaces: ["crdfn-system"] }), /test: namespaces: crdfn-system is never served/);
    assert.deepEqual(settingsOf({ namespaces: ["kube-system"] }).namespaces, ["kube-system"], "kube-system is served when listed");
    assert.throws(
      () => deployFiles([{ operator: widget, handler: "lambda.handler" }], settingsOf({ namespaces: [] })),
      (e: Error) =>
        e instanceof ConfigError &&
        /^namespaces: name the namespaces the operators serve \(Widget is namespaced\)/.test(e.message) &&
        !e.message.includes("\n"),
    );
    assert.throws(() => settingsOf({ queues: { urlBase: "nope" } }), /test: queues\.urlBase: must be a URL/);
    assert.throws(() => parseDeploySettings({ clutser: "x" }, "s.yaml"), /s\.yaml: \(top\): Unrecognized key/);
  });

  it("refuses to guess: every value crdfn cannot know is named in one line, with its flag", () => {
    const flags = { project: "--project", cluster: "--cluster", "bridge.image": "--bridge-image", "queues.urlBase": "--queue-url-base" } as const;
    assert.throws(
      () => parseDeploySettings({ operators: [], bridge: { image: null } }, "crdfn.deploy.yaml", flags),
      (e: Error) =>
        e instanceof ConfigError &&
        !e.message.includes("\n") &&
        /^crdfn\.deploy\.yaml: set project \(--project; .*\), cluster \(--cluster; .*\), bridge\.image \(--bridge-image; .*Dockerfile.*\), queues\.urlBase \(--queue-url-base; https:\/\/sqs\.<region>\.amazonaws\.com\/<account id>.*\): crdfn cannot know them and writes no placeholder$/.test(
          e.message,
        ),
    );
    assert.throws(
      () => parseDeploySettings({ ...known, cluster: undefined }, "flags"),
      /^ConfigError: flags: set cluster \(the cluster's name.*\): crdfn cannot know it and/,
    );
    assert.throws(
      () => settingsOf({ queues: { urlBase: "https://sqs.us-east-1.amazonaws.com/000000000000" } }),
      /queues\.urlBase: 000000000000 is a placeholder, not an AWS account/,
    );
    assert.throws(
      () => settingsOf({ queues: { urlBase: "https://sqs.us-east-1.amazonaws.com/" } }),
      /queues\.urlBase: must end in the 12-digit AWS account id/,
    );
    assert.throws(
      () => settingsOf({ queues: { urlBase: "https://sqs.us-east-1.amazonaws.com/123456789012", region: "eu-west-1" } }),
      /queues\.region: eu-west-1 is not the region of queues\.urlBase \(us-east-1\)/,
    );
    assert.throws(
      () => settingsOf({ queues: { urlBase: "http://elasticmq.local:9324/000000000000" } }),
      /queues\.region: required when queues\.urlBase is not an AWS SQS endpoint/,
    );
    // Derived: the region from an AWS endpoint, the queue prefix from the project.
    assert.deepEqual(settingsOf().queues, { prefix: "crdfn-shop-", urlBase: "https://sqs.eu-west-1.amazonaws.com/123456789012", region: "eu-west-1" });
    assert.equal(
      settingsOf({ queues: { urlBase: "http://elasticmq.local:9324/000000000000/", region: "us-east-1" } }).queues.urlBase,
      "http://elasticmq.local:9324/000000000000",
    );
  });
});

describe("crdfn generate in a project", () => {
  // Inside the checkout, like a project with crdfn installed, so the operators' `import "crdfn"` resolves.
  mkdirSync(join(root, ".crdfn"), { recursive: true });
  const project = mkdtempSync(join(root, ".crdfn", "generate-unit-"));
  after(() => rmSync(project, { recursive: true, force: true }));
  const operator = (kind: string) => `import { z } from "zod";
import { defineOperator } from "crdfn";
export default defineOperator({ resource: { group: "shop.example.com", version: "v1", plural: "${kind.toLowerCase()}s", kind: "${kind}" }, spec: z.object({}), reconcile: () => ({}) });
`;
  mkdirSync(join(project, "operators"));
  writeFileSync(join(project, "operators", "widget.ts"), operator("Widget"));
  writeFileSync(join(project, "operators", "gadget.ts"), operator("Gadget"));
  const flags = {
    project: "shop",
    cluster: "prod",
    namespace: ["shop"],
    bridgeImage: "registry.example.com/shop/bridge:1",
    queueUrlBase: "https://sqs.eu-west-1.amazonaws.com/123456789012",
  };

  it("refuses a default Lambda handler that does not exist, in one line naming it", async () => {
    await assert.rejects(
      generate(["operators/widget.ts"], flags, project),
      (e: Error) =>
        e instanceof SetupError &&
        e.message ===
          "operators/widget.ts: handler operators/lambda.handler (the default: lambda.handler beside operators/widget.ts): no operators/lambda.ts or .js in .; write that Lambda entry (crdfn init writes one) or name yours with handler: in crdfn.deploy.yaml",
    );
  });

  it("refuses two operators behind one Lambda entry", async () => {
    writeFileSync(join(project, "operators", "lambda.ts"), "export const handler = () => {};\n");
    await assert.rejects(
      generate(["operators/widget.ts", "operators/gadget.ts"], flags, project),
      /^SetupError: operators\/gadget\.ts: handler operators\/lambda\.handler .* is also Widget's: one Lambda entry serves one operator/,
    );
  });

  it("says it read ./crdfn.deploy.yaml, and takes a module named on the command line and in the settings once", async () => {
    writeFileSync(join(project, "crdfn.deploy.yaml"), "operators:\n  - module: operators/widget.ts\n    handler: operators/lambda.handler\n");
    const g = await generate(["operators/widget.ts"], flags, project);
    assert.deepEqual(g.settingsFile, { path: join(project, "crdfn.deploy.yaml"), found: true });
    assert.match(g.files.get("serverless/functions.yml")!, /^widget:\n {2}handler: operators\/lambda\.handler$/m);
    assert.equal((await generate([], { ...flags, settings: "crdfn.deploy.yaml" }, project)).settingsFile?.found, false);
  });

  it("names both modules of one resource", async () => {
    writeFileSync(join(project, "operators", "widget-too.ts"), operator("Widget"));
    await assert.rejects(
      generate(["operators/widget-too.ts"], flags, project),
      /two operators manage widgets\.shop\.example\.com: operators\/widget\.ts and operators\/widget-too\.ts/,
    );
  });
});
