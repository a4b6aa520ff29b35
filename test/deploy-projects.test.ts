// Two users' projects, each generated with `crdfn generate` and applied to the same real cluster:
// each keeps its own bridge (objects, configuration, RBAC, Lease) whatever order they are applied
// in; and a cluster-scoped operator's function, with its real identities, writes its cluster-scoped
// object's status and its children (namespaced and cluster-scoped) under the generated admission
// policy, which still refuses what it must.
import assert from "node:assert/strict";
import { TEST_EVENT_KEY, testOperatorKey } from "./support/event-key.ts";
import { formatEventKey } from "../core/event-auth.ts";
import { after, before, describe, it } from "node:test";
import { parse } from "yaml";
import { startCluster, type LocalCluster } from "../emulator/cluster.ts";
import { sqsClient } from "../clients/sqs-client.ts";
import { startBridge } from "../bridge/bridge.ts";
import { loadBridgeConfig } from "../bridge/config.ts";
import { serverConnection } from "../clients/kube-connection.ts";
import { loadOperator } from "../cli/operators.ts";
import { ensureQueues, queueDefinitions } from "../emulator/queues.ts";
import { startLocalFunctions } from "../functions/adapters/local.ts";
import { pino } from "pino";
import { eventually } from "./support/eventually.ts";
import { adminKubectl, denied, lambdaGroupKubectl, serviceAccountKubectl, type Kubectl } from "./support/identities.ts";
import { applyDeployFiles, deploySettings, lambdaEntry, makeProject, type Project } from "./support/projects.ts";

const AUTHORIZED_KEY = `// AuthorizedKey (cluster-scoped): the key as a ConfigMap in the namespace its spec names, and a ClusterRole reading it.
import { z } from "zod";
import { defineOperator } from "crdfn";

export default defineOperator({
  resource: { group: "keys.example.com", version: "v1", plural: "authorizedkeys", kind: "AuthorizedKey", scope: "Cluster" },
  spec: z.object({ key: z.string(), namespace: z.string() }),
  owns: [
    { group: "", version: "v1", kind: "ConfigMap" },
    { group: "rbac.authorization.k8s.io", version: "v1", kind: "ClusterRole", namespaced: false },
  ],
  reconcile: (k) => ({
    children: [
      { apiVersion: "v1", kind: "ConfigMap", metadata: { name: \`\${k.metadata.name}-key\`, namespace: k.spec.namespace }, data: { key: k.spec.key } },
      { apiVersion: "rbac.authorization.k8s.io/v1", kind: "ClusterRole", metadata: { name: \`\${k.metadata.name}-key-reader\` }, rules: [] },
    ],
    status: { phase: "Ready" },
  }),
});
`;

const WIDGET = `import { z } from "zod";
import { defineOperator } from "crdfn";

export default defineOperator({
  resource: { group: "shop.example.com", version: "v1", plural: "widgets", kind: "Widget" },
  spec: z.object({ color: z.string() }),
  owns: [{ group: "", version: "v1", kind: "ConfigMap" }],
  reconcile: (w) => ({ children: [{ apiVersion: "v1", kind: "ConfigMap", metadata: { name: \`\${w.metadata.name}-widget\` }, data: { color: w.spec.color } }] }),
});
`;

interface BridgeConfig {
  cluster: string;
  resources: Array<{ group: string; plural: string; queueUrl: string }>;
  lease: { name: string };
}

describe("two projects' deploy files on one cluster; a cluster-scoped operator under its admission policy", { timeout: 300_000 }, () => {
  let cluster: LocalCluster;
  let admin: Kubectl;
  let keys: Project;
  let shop: Project;

  before(async () => {
    keys = makeProject("keys", {
      "crdfn.deploy.yaml": deploySettings("keys", {
        namespaces: ["keyring"],
        operators: [{ module: "operators/authorized-key.ts", handler: "operators/lambda.handler" }],
      }),
      "operators/authorized-key.ts": AUTHORIZED_KEY,
      "operators/lambda.ts": lambdaEntry("./authorized-key.ts"),
    });
    shop = makeProject("shop", {
      "crdfn.deploy.yaml": deploySettings("shop", { operators: [{ module: "operator.ts" }] }),
      "operator.ts": WIDGET,
      "lambda.ts": lambdaEntry(),
    });
    await keys.generate();
    await shop.generate();
    cluster = await startCluster({ log: () => {} });
    admin = adminKubectl(cluster);
    // The namespaces the projects serve are the user's: they exist before crdfn's grants in them.
    await admin(["create", "namespace", "keyring"]);
  });

  after(async () => {
    await cluster?.stop();
    keys?.remove();
    shop?.remove();
  });

  const bridgeConfig = async (project: string): Promise<BridgeConfig> => {
    const data = JSON.parse(await admin(["get", "configmap", `crdfn-bridge-${project}`, "-n", "crdfn-system", "-o", "jsonpath={.data}"])) as Record<
      string,
      string
    >;
    return parse(data["bridge.yaml"]!) as BridgeConfig;
  };
  const canI = async (serviceAccount: string, verb: string, resource: string, namespace?: string): Promise<string> => {
    try {
      return (
        await admin([
          "auth",
          "can-i",
          verb,
          resource,
          ...(namespace ? ["-n", namespace] : ["--all-namespaces"]),
          `--as=system:serviceaccount:crdfn-system:${serviceAccount}`,
        ])
      ).trim();
    } catch (e) {
      return String((e as { stdout?: string }).stdout ?? "").trim();
    }
  };

  it("applies both projects, and each keeps its own bridge: objects, configuration, RBAC and Lease", async () => {
    await applyDeployFiles(admin, `${keys.dir}/deploy`);
    await applyDeployFiles(admin, `${shop.dir}/deploy`);
    // Applying the first project again changes nothing of the second's.
    const shopBefore = await admin(["get", "configmap", "crdfn-bridge-shop", "-n", "crdfn-system", "-o", "jsonpath={.data}"]);
    await applyDeployFiles(admin, `${keys.dir}/deploy`);
    assert.equal(await admin(["get", "configmap", "crdfn-bridge-shop", "-n", "crdfn-system", "-o", "jsonpath={.data}"]), shopBefore);

    const names = (kind: string, ns?: string) =>
      admin(["get", kind, ...(ns ? ["-n", ns] : []), "-o", "jsonpath={.items[*].metadata.name}"]).then((s) =>
        s
          .split(" ")
          .filter((n) => n.startsWith("crdfn-bridge"))
          .sort(),
      );
    assert.deepEqual(await names("deployments", "crdfn-system"), ["crdfn-bridge-keys", "crdfn-bridge-shop"]);
    assert.deepEqual(await names("serviceaccounts", "crdfn-system"), ["crdfn-bridge-keys", "crdfn-bridge-shop"]);
    assert.deepEqual(await names("configmaps", "crdfn-system"), ["crdfn-bridge-keys", "crdfn-bridge-shop"]);
    assert.deepEqual(await names("roles", "crdfn-system"), ["crdfn-bridge-keys-lease", "crdfn-bridge-shop-lease"]);
    // Cluster-wide only what is cluster-scoped (AuthorizedKeys, ClusterRoles); the rest are Roles in the served namespaces.
    assert.deepEqual(await names("clusterroles"), ["crdfn-bridge-keys-cluster"]);
    assert.deepEqual(await names("roles", "keyring"), ["crdfn-bridge-keys"]);
    assert.deepEqual(await names("roles", "default"), ["crdfn-bridge-shop"]);

    const keysConfig = await bridgeConfig("keys");
    const shopConfig = await bridgeConfig("shop");
    assert.deepEqual(
      keysConfig.resources.map((r) => [r.plural, r.queueUrl]),
      [["authorizedkeys", "https://sqs.eu-west-1.amazonaws.com/123456789012/crdfn-keys-authorizedkey.fifo"]],
    );
    assert.deepEqual(
      shopConfig.resources.map((r) => [r.plural, r.queueUrl]),
      [["widgets", "https://sqs.eu-west-1.amazonaws.com/123456789012/crdfn-shop-widget.fifo"]],
    );
    assert.deepEqual([keysConfig.lease.name, shopConfig.lease.name], ["crdfn-bridge-keys", "crdfn-bridge-shop"]);

    // Each bridge's identity watches its own resources and their children, not the other project's.
    assert.equal(await canI("crdfn-bridge-keys", "watch", "authorizedkeys.keys.example.com"), "yes");
    assert.equal(await canI("crdfn-bridge-keys", "watch", "clusterroles.rbac.authorization.k8s.io"), "yes");
    assert.equal(await canI("crdfn-bridge-keys", "watch", "configmaps", "keyring"), "yes");
    assert.equal(await canI("crdfn-bridge-keys", "watch", "configmaps", "default"), "no");
    assert.equal(await canI("crdfn-bridge-keys", "watch", "widgets.shop.example.com", "default"), "no");
    assert.equal(await canI("crdfn-bridge-shop", "watch", "widgets.shop.example.com", "default"), "yes");
    assert.equal(await canI("crdfn-bridge-shop", "watch", "widgets.shop.example.com"), "no", "only in the namespace it serves");
    assert.equal(await canI("crdfn-bridge-shop", "watch", "authorizedkeys.keys.example.com"), "no");
    for (const [sa, lease] of [
      ["crdfn-bridge-keys", "crdfn-bridge-keys"],
      ["crdfn-bridge-shop", "crdfn-bridge-shop"],
      ["crdfn-bridge-keys", "crdfn-bridge-shop"],
    ] as const) {
      const answer = (
        await admin([
          "auth",
          "can-i",
          "update",
          `leases.coordination.k8s.io/${lease}`,
          "-n",
          "crdfn-system",
          `--as=system:serviceaccount:crdfn-system:${sa}`,
        ]).catch((e: { stdout?: string }) => String(e.stdout))
      ).trim();
      assert.equal(answer, sa === lease ? "yes" : "no", `${sa} updating Lease ${lease}`);
    }
  });

  it("lets the cluster-scoped AuthorizedKey's function write its status and its children, namespaced and cluster-scoped, with both of its identities", async () => {
    const identities: Array<[string, Kubectl]> = [
      ["ServiceAccount crdfn-functions/crdfn-authorizedkey (token)", await serviceAccountKubectl(cluster, admin, "crdfn-authorizedkey", "crdfn-functions")],
      ["Lambda group crdfn:authorizedkey (impersonated)", lambdaGroupKubectl(cluster, "authorizedkey")],
    ];
    const apply = (k: Kubectl, body: unknown) => k(["apply", "--server-side", "--force-conflicts", "--field-manager=crdfn", "-f", "-"], JSON.stringify(body));
    // The policy takes effect once the API server has loaded it: wait for its first denial (a dry run writes nothing).
    await eventually(
      async () =>
        assert.equal(
          (
            await denied(
              identities[0]![1](
                ["apply", "--server-side", "--dry-run=server", "--field-manager=crdfn", "-f", "-"],
                JSON.stringify({ apiVersion: "v1", kind: "ConfigMap", metadata: { name: "probe", namespace: "keyring" } }),
              ),
            )
          ).by,
          "admission policy",
        ),
      { timeoutMs: 30_000, intervalMs: 500 },
    );
    for (const [who, k] of identities) {
      const name = who.startsWith("ServiceAccount") ? "alice" : "bob";
      await admin(
        ["apply", "--server-side", "-f", "-"],
        JSON.stringify({
          apiVersion: "keys.example.com/v1",
          kind: "AuthorizedKey",
          metadata: { name },
          spec: { key: `ssh-ed25519 ${name}`, namespace: "keyring" },
        }),
      );
      // What the runtime does, one request each: read the object, apply its children, write its status.
      const object = JSON.parse(await k(["get", "authorizedkey", name, "-o", "json"])) as { metadata: { uid: string }; status?: unknown };
      const owner = { apiVersion: "keys.example.com/v1", kind: "AuthorizedKey", name, uid: object.metadata.uid, controller: true, blockOwnerDeletion: true };
      await apply(k, {
        apiVersion: "v1",
        kind: "ConfigMap",
        metadata: { name: `${name}-key`, namespace: "keyring", ownerReferences: [owner] },
        data: { key: `ssh-ed25519 ${name}` },
      });
      await apply(k, {
        apiVersion: "rbac.authorization.k8s.io/v1",
        kind: "ClusterRole",
        metadata: { name: `${name}-key-reader`, ownerReferences: [owner] },
        rules: [],
      });
      await k(["replace", "--subresource=status", "-f", "-"], JSON.stringify({ ...object, status: { phase: "Ready" } }));

      const status = JSON.parse(await admin(["get", "authorizedkey", name, "-o", "jsonpath={.status}"])) as { phase?: string };
      assert.equal(status.phase, "Ready", `${who}: status written`);
      const cm = JSON.parse(await admin(["get", "configmap", `${name}-key`, "-n", "keyring", "-o", "json"])) as {
        metadata: { ownerReferences: Array<{ uid: string }> };
      };
      assert.equal(cm.metadata.ownerReferences[0]?.uid, object.metadata.uid, `${who}: namespaced child`);
      const role = JSON.parse(await admin(["get", "clusterrole", `${name}-key-reader`, "-o", "json"])) as {
        metadata: { ownerReferences: Array<{ uid: string }> };
      };
      assert.equal(role.metadata.ownerReferences[0]?.uid, object.metadata.uid, `${who}: cluster-scoped child`);

      // What it must still not do: a cluster-scoped object it does not own, and any write in
      // kube-system (not served: it holds no grant there at all).
      const planted = await denied(
        apply(k, { apiVersion: "rbac.authorization.k8s.io/v1", kind: "ClusterRole", metadata: { name: `${name}-planted` }, rules: [] }),
      );
      assert.equal(planted.by, "admission policy", `${who}: ${planted.message}`);
      assert.match(planted.message, /crdfn: the authorizedkey function may write clusterroles only with a controller owner reference to its AuthorizedKey/);
      const system = await denied(
        apply(k, { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "aws-auth", namespace: "kube-system", ownerReferences: [owner] }, data: {} }),
      );
      assert.equal(system.by, "RBAC", `${who}: ${system.message}`);
      assert.match(system.message, /in the namespace "kube-system"/);
    }
    await assert.rejects(admin(["get", "clusterrole", "alice-planted"]), /NotFound/);
    await assert.rejects(admin(["get", "configmap", "aws-auth", "-n", "kube-system"]), /NotFound/);
  });

  it("both projects reconcile on the same cluster, each bridge and each function with its generated identity's token", async () => {
    // Each project as deployed: its bridge with the generated ConfigMap's settings and its
    // ServiceAccount's token, publishing to a queue of its own (the local stand-in for its SQS
    // queues), and its functions with their ServiceAccounts' tokens.
    const logger = pino({ level: "silent" });
    const sqs = sqsClient(cluster.sqs);
    const running: Array<() => Promise<void>> = [];
    try {
      for (const [project, modules] of [
        [keys, ["operators/authorized-key.ts"]],
        [shop, ["operator.ts"]],
      ] as const) {
        const name = project === keys ? "keys" : "shop";
        const queues = await ensureQueues(sqs, queueDefinitions(`${name}-events`));
        const file = parse(await admin(["get", "configmap", `crdfn-bridge-${name}`, "-n", "crdfn-system", "-o", "jsonpath={.data.bridge\\.yaml}"])) as Record<
          string,
          unknown
        > & { resources: Array<Record<string, unknown>> };
        const local = {
          ...file,
          queue: { url: queues.fifo },
          resources: file.resources.map((r) => ({ ...r, queueUrl: queues.fifo })),
          lease: { name: undefined },
        };
        const token = async (sa: string, ns: string) => (await admin(["create", "token", sa, "-n", ns, "--duration=10m"])).trim();
        const bridgeToken = await token(`crdfn-bridge-${name}`, "crdfn-system");
        const bridge = startBridge(
          loadBridgeConfig({ AWS_REGION: cluster.sqs.region, AWS_ENDPOINT_URL_SQS: cluster.sqs.endpoint, CRDFN_HTTP_PORT: "0" }, local),
          {
            eventKey: TEST_EVENT_KEY,
            kubeConfig: serverConnection({ server: cluster.server, caFile: cluster.caPath, token: () => Promise.resolve(bridgeToken) }),
            sqs,
            logger,
          },
        );
        running.push(() => bridge.stop(1000));
        await bridge.ready;
        const operators = await Promise.all(modules.map((m) => loadOperator(`${project.dir}/${m}`)));
        const tokens = new Map(
          await Promise.all(
            operators.map(async (op) => [op.resource.kind, await token(`crdfn-${op.resource.kind.toLowerCase()}`, "crdfn-functions")] as const),
          ),
        );
        const poller = startLocalFunctions(operators, {
          env: { ...cluster.env, CRDFN_QUEUE_URL: queues.fifo, CRDFN_CLUSTER: String(file.cluster), LOG_LEVEL: "silent", KUBECONFIG: undefined },
          envOf: (op) => ({
            CRDFN_KUBE_AUTH: "token",
            CRDFN_KUBE_SERVER: cluster.server,
            CRDFN_KUBE_CA_FILE: cluster.caPath,
            CRDFN_KUBE_TOKEN: tokens.get(op.resource.kind) ?? "",
            // As deployed: each function its own operator's key.
            CRDFN_EVENT_KEYS: formatEventKey(testOperatorKey(op.resource)),
          }),
          waitTimeSeconds: 1,
        });
        running.push(() => poller.stop());
      }
      await admin(
        ["apply", "--server-side", "-f", "-"],
        JSON.stringify({
          apiVersion: "keys.example.com/v1",
          kind: "AuthorizedKey",
          metadata: { name: "carol" },
          spec: { key: "ssh-ed25519 carol", namespace: "keyring" },
        }),
      );
      await admin(
        ["apply", "--server-side", "-f", "-"],
        JSON.stringify({ apiVersion: "shop.example.com/v1", kind: "Widget", metadata: { name: "w1", namespace: "default" }, spec: { color: "red" } }),
      );
      await eventually(
        async () =>
          assert.equal(
            (JSON.parse(await admin(["get", "configmap", "carol-key", "-n", "keyring", "-o", "jsonpath={.data}"])) as { key?: string }).key,
            "ssh-ed25519 carol",
          ),
        { timeoutMs: 60_000, intervalMs: 500 },
      );
      await eventually(
        async () =>
          assert.equal(
            (JSON.parse(await admin(["get", "configmap", "w1-widget", "-n", "default", "-o", "jsonpath={.data}"])) as { color?: string }).color,
            "red",
          ),
        { timeoutMs: 60_000, intervalMs: 500 },
      );
      for (const [what, args] of [
        ["AuthorizedKey carol", ["get", "authorizedkey", "carol"]],
        ["Widget w1", ["get", "widget", "w1", "-n", "default"]],
      ] as const) {
        await eventually(async () => assert.equal(await admin([...args, "-o", 'jsonpath={.status.conditions[?(@.type=="Ready")].status}']), "True", what), {
          timeoutMs: 60_000,
          intervalMs: 500,
        });
      }
    } finally {
      for (const stop of running.reverse()) await stop();
      sqs.destroy();
    }
  });
});
