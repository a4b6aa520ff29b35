// A user's operator, from `crdfn generate` to a real API server: the generated output passes a
// server-side dry run, applies, lets the function reconcile with its ServiceAccount's token, and
// then denies every attack tried with the function's real identities (that token, and the Lambda
// group impersonated) — by RBAC outside the served namespace, by the admission policy inside it.
import { execFile } from "node:child_process";
import { signedForTest, testRuntimeKeys } from "./support/event-key.ts";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { CoreV1Api } from "@kubernetes/client-node";
import { pino } from "pino";
import { parseAllDocuments } from "yaml";
import type { Operator } from "../core/operator.ts";
import { loadOperator } from "../cli/operators.ts";
import { startCluster, type LocalCluster } from "../emulator/cluster.ts";
import { packageRoot } from "../emulator/paths.ts";
import { apiAccess } from "./support/api-access.ts";
import { loadConfig } from "../functions/runtime/config.ts";
import { createKubeApi } from "../functions/runtime/kube-api-http.ts";
import { handleMessage, createRuntime } from "../functions/runtime/runtime.ts";
import { keyEventOf } from "./support/functions-environment.ts";
import { eventually } from "./support/eventually.ts";
import { adminKubectl, denied, lambdaGroupKubectl, serviceAccountKubectl, type Denial, type Kubectl } from "./support/identities.ts";

const run = promisify(execFile);
const SERVED = "shop";
const UNSERVED = "warehouse";

const OPERATOR = `import { z } from "zod";
import { defineOperator } from "crdfn";

export default defineOperator({
  resource: { group: "shop.example.com", version: "v1", plural: "widgets", kind: "Widget" },
  spec: z.object({ color: z.string() }),
  owns: [{ group: "", version: "v1", kind: "ConfigMap" }],
  finalizer: "shop.example.com/cleanup",
  reconcile: (w) => ({
    children: [{ apiVersion: "v1", kind: "ConfigMap", metadata: { name: \`\${w.metadata.name}-widget\` }, data: { color: w.spec.color } }],
    status: { phase: "Ready" },
  }),
});
`;
const SETTINGS = `project: shop
operators:
  - module: src/operator.ts
out: deploy
cluster: shop-test
namespaces: [${SERVED}]
bridge: { image: registry.example.com/shop/crdfn-bridge:0.1.0 }
queues: { prefix: shop-prod-, urlBase: https://sqs.eu-west-1.amazonaws.com/123456789012, region: eu-west-1 }
`;

const configMap = (namespace: string, name: string, extra: Record<string, unknown> = {}) =>
  JSON.stringify({ apiVersion: "v1", kind: "ConfigMap", metadata: { name, namespace, ...extra }, data: { x: "y" } });

describe("crdfn generate → a real API server, attacked with the function's identities", { timeout: 300_000 }, () => {
  let cluster: LocalCluster;
  let folder: string;
  let admin: Kubectl;
  let operator: Operator<unknown>;
  const report: string[] = [];

  before(async () => {
    mkdirSync(join(packageRoot, ".crdfn"), { recursive: true });
    // Inside the checkout, like a user's project with crdfn installed, so `import "crdfn"` resolves.
    folder = mkdtempSync(join(packageRoot, ".crdfn", "generate-"));
    mkdirSync(join(folder, "src"));
    writeFileSync(join(folder, "src", "operator.ts"), OPERATOR);
    writeFileSync(
      join(folder, "src", "lambda.ts"),
      `import { lambdaHandler } from "crdfn/lambda";\nimport operator from "./operator.ts";\nexport const handler = lambdaHandler(operator);\n`,
    );
    writeFileSync(join(folder, "crdfn.deploy.yaml"), SETTINGS);
    const generated = await run(process.execPath, ["--conditions=crdfn-source", join(packageRoot, "cli", "main.ts"), "generate"], { cwd: folder });
    assert.match(generated.stdout, /wrote \d+ files into deploy\//);
    operator = await loadOperator(join(folder, "src", "operator.ts"));
    cluster = await startCluster({ queue: false, log: () => {} });
    admin = adminKubectl(cluster, folder);
    for (const ns of [SERVED, UNSERVED]) await admin(["create", "namespace", ns]);
  });

  after(async () => {
    if (report.length) console.log(`\nAttacks and the API server's answers:\n${report.join("\n")}`);
    await cluster?.stop();
    if (folder) rmSync(folder, { recursive: true, force: true });
  });

  it("passes a server-side dry run, then applies for real", async () => {
    const objects = parseAllDocuments(await admin(["kustomize", "deploy"])).map((d) => d.toJS() as { kind: string; metadata: { name: string } });
    // A dry run cannot create the namespaces the objects after them live in.
    for (const ns of objects.filter((o) => o.kind === "Namespace")) await admin(["create", "namespace", ns.metadata.name]);
    const dry = await admin(["apply", "--server-side", "--dry-run=server", "-k", "deploy"]);
    for (const o of objects) assert.match(dry, new RegExp(`/${o.metadata.name} serverside-applied \\(server dry run\\)`), `${o.kind} ${o.metadata.name}`);
    await assert.rejects(admin(["get", "crd", "widgets.shop.example.com"]), /NotFound/);
    // Roles in the served namespace; nothing cluster-wide for the function's or the bridge's children.
    assert.deepEqual(
      objects.filter((o) => /^Cluster(Role|RoleBinding)$/.test(o.kind)),
      [],
    );
    await admin(["apply", "--server-side", "-k", "deploy"]);
    await admin(["wait", "--for=condition=Established", "--timeout=60s", "crd/widgets.shop.example.com"]);
  });

  it("reconciles with the function's ServiceAccount token: child created with its owner reference", async () => {
    const token = (await admin(["create", "token", "crdfn-widget", "-n", "crdfn-functions", "--duration=10m"])).trim();
    const api = createKubeApi(
      await apiAccess(
        loadConfig({ CRDFN_KUBE_AUTH: "token", CRDFN_KUBE_SERVER: cluster.server, CRDFN_KUBE_CA_FILE: cluster.caPath, CRDFN_KUBE_TOKEN: token }),
        { clock: () => new Date() },
      ),
    );
    const runtime = createRuntime(operator, { api, logger: pino({ level: "silent" }), clock: () => new Date(), ...testRuntimeKeys(operator, "test") });
    await admin(
      ["apply", "--server-side", "-f", "-"],
      JSON.stringify({ apiVersion: "shop.example.com/v1", kind: "Widget", metadata: { name: "blue", namespace: SERVED }, spec: { color: "blue" } }),
    );
    const cr = JSON.parse(await admin(["get", "widget", "blue", "-n", SERVED, "-o", "json"])) as { metadata: { uid: string } };
    const out = await handleMessage(runtime, { id: "1", body: JSON.stringify(signedForTest(keyEventOf(operator, cr))) });
    assert.equal(out.result, "success", out.detail);
    const cm = cluster.kubeConfig.makeApiClient(CoreV1Api);
    const child = await cm.readNamespacedConfigMap({ name: "blue-widget", namespace: SERVED });
    assert.equal(child.metadata?.ownerReferences?.[0]?.uid, cr.metadata.uid);
  });

  it("denies every attack, by RBAC or with the admission policy's message", async () => {
    await admin(["create", "configmap", "victim-widget", "-n", SERVED, "--from-literal=owner=someone-else"]);
    const blue = JSON.parse(await admin(["get", "widget", "blue", "-n", SERVED, "-o", "json"])) as { metadata: { uid: string } };
    const forgedOwner = { ownerReferences: [{ apiVersion: "shop.example.com/v1", kind: "Widget", name: "blue", uid: blue.metadata.uid, controller: true }] };
    const identities: Array<[string, Kubectl]> = [
      ["ServiceAccount crdfn-functions/crdfn-widget (token)", await serviceAccountKubectl(cluster, admin, "crdfn-widget", "crdfn-functions")],
      ["Lambda group crdfn:widget (impersonated)", lambdaGroupKubectl(cluster, "widget")],
    ];
    const apply = (k: Kubectl, body: string) => k(["apply", "--server-side", "--force-conflicts", "--field-manager=crdfn", "-f", "-"], body);
    const attacks: Array<[string, Denial["by"], RegExp, (k: Kubectl) => Promise<unknown>]> = [
      [
        "server-side apply kube-system/aws-auth mapping system:masters",
        "RBAC",
        /cannot patch resource "configmaps".*"kube-system"/,
        (k) =>
          apply(
            k,
            JSON.stringify({
              apiVersion: "v1",
              kind: "ConfigMap",
              metadata: { name: "aws-auth", namespace: "kube-system" },
              data: { mapRoles: "- rolearn: arn:aws:iam::1:role/x\n  groups: [system:masters]" },
            }),
          ),
      ],
      [
        "rewrite the bridge's ConfigMap crdfn-system/crdfn-bridge-shop",
        "RBAC",
        /cannot (get|patch) resource "configmaps".*"crdfn-system"/,
        (k) =>
          k(["patch", "configmap", "crdfn-bridge-shop", "-n", "crdfn-system", "--type=merge", "-p", '{"data":{"bridge.yaml":"queue: {url: https://evil}"}}']),
      ],
      [
        `create a ConfigMap in ${SERVED} without an owner reference`,
        "admission policy",
        /crdfn: the widget function may write configmaps only with a controller owner reference to its Widget/,
        (k) => k(["create", "-f", "-"], configMap(SERVED, "planted")),
      ],
      [
        `take over ${SERVED}/victim-widget by applying it with a forged owner reference`,
        "admission policy",
        /crdfn: the widget function may change or delete configmaps victim-widget only if that Widget already controls it/,
        (k) => apply(k, configMap(SERVED, "victim-widget", forgedOwner)),
      ],
      // kubectl patch reads the object first, which the function may not (it does not observe
      // ConfigMaps); a server-side apply sends the PATCH alone, and the policy refuses it.
      [
        `patch ${SERVED}/victim-widget, leaving it unowned`,
        "admission policy",
        /may write configmaps only with a controller owner reference/,
        (k) => apply(k, JSON.stringify({ apiVersion: "v1", kind: "ConfigMap", metadata: { name: "victim-widget", namespace: SERVED }, data: { owner: "me" } })),
      ],
      [
        `read ${SERVED}/victim-widget (a kind it owns but does not observe)`,
        "RBAC",
        /cannot get resource "configmaps"/,
        (k) => k(["get", "configmap", "victim-widget", "-n", SERVED, "-o", "json"]),
      ],
      [
        `delete ${SERVED}/victim-widget`,
        "admission policy",
        /may change or delete configmaps victim-widget only if that Widget already controls it/,
        (k) => k(["delete", "configmap", "victim-widget", "-n", SERVED]),
      ],
      [
        `create a ConfigMap (even with an owner reference) in unserved ${UNSERVED}`,
        "RBAC",
        /cannot create resource "configmaps".*"warehouse"/,
        (k) => k(["create", "-f", "-"], configMap(UNSERVED, "planted", forgedOwner)),
      ],
      [
        `create an Event in unserved ${UNSERVED}`,
        "RBAC",
        /cannot create resource "events"/,
        (k) =>
          k(
            ["create", "-f", "-"],
            JSON.stringify({
              apiVersion: "v1",
              kind: "Event",
              metadata: { name: "e", namespace: UNSERVED },
              involvedObject: { kind: "Widget", name: "blue" },
              reason: "x",
              message: "x",
            }),
          ),
      ],
      [`read Secrets in ${SERVED}`, "RBAC", /cannot list resource "secrets"/, (k) => k(["get", "secrets", "-n", SERVED])],
      // Listing its own kinds in a served namespace is granted (observed children, pruning); watching is not.
      [`list ConfigMaps in unserved ${UNSERVED}`, "RBAC", /cannot list resource "configmaps"/, (k) => k(["get", "configmaps", "-n", UNSERVED])],
      [
        `watch ConfigMaps in ${SERVED}`,
        "RBAC",
        /cannot watch resource "configmaps"/,
        (k) => k(["get", "--raw", `/api/v1/namespaces/${SERVED}/configmaps?watch=1&timeoutSeconds=1`]),
      ],
      [
        "watch Widgets everywhere",
        "RBAC",
        /cannot (list|watch) resource "widgets"/,
        (k) => k(["get", "--raw", "/apis/shop.example.com/v1/widgets?watch=1&timeoutSeconds=1"]),
      ],
      [
        "create a RoleBinding to escalate",
        "RBAC",
        /cannot create resource "rolebindings"/,
        (k) => k(["create", "rolebinding", "x", "-n", SERVED, "--clusterrole=cluster-admin", "--group=crdfn:widget"]),
      ],
    ];
    // The policy takes effect once the API server has loaded it: wait for the first policy denial.
    await eventually(async () => assert.equal((await denied(identities[0]![1](["create", "-f", "-"], configMap(SERVED, "probe")))).by, "admission policy"), {
      timeoutMs: 30_000,
      intervalMs: 500,
    });
    for (const [who, k] of identities) {
      for (const [what, by, message, attack] of attacks) {
        const d = await denied(attack(k));
        report.push(`- ${who}: ${what} → ${d.by}: ${d.message}`);
        assert.equal(d.by, by, `${who}: ${what}: ${d.message}`);
        assert.match(d.message, message, `${who}: ${what}`);
      }
    }
    // The victim is untouched.
    const victim = JSON.parse(await admin(["get", "configmap", "victim-widget", "-n", SERVED, "-o", "json"])) as {
      data: Record<string, string>;
      metadata: { ownerReferences?: unknown[] };
    };
    assert.deepEqual(victim.data, { owner: "someone-else" });
    assert.equal(victim.metadata.ownerReferences, undefined);
  });

  it("prints what each identity may do (kubectl auth can-i --list)", async () => {
    for (const [label, args] of [
      ["ServiceAccount", ["--as=system:serviceaccount:crdfn-functions:crdfn-widget"]],
      ["Lambda group", ["--as=lambda-session", "--as-group=crdfn:widget", "--as-group=system:authenticated"]],
    ] as const) {
      for (const ns of [SERVED, UNSERVED]) {
        const out = await admin(["auth", "can-i", "--list", "-n", ns, ...args]);
        console.log(`\n$ kubectl auth can-i --list -n ${ns} ${args.join(" ")}   # ${label}\n${out}`);
        assert.equal(/^configmaps\s/m.test(out), ns === SERVED, `${label} in ${ns}`);
      }
    }
  });
});
