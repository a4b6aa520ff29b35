// The Kubernetes side of a deployment, against a real API server: the CRDs and the kustomize
// trees pass a server-side dry run, and the functions' identities (the ServiceAccount for
// in-cluster use, the group an EKS access entry maps the Lambda's IAM role to) get exactly their
// resource, its status, their owned kinds and events — proven with SubjectAccessReviews, and by
// running each operator with nothing but its ServiceAccount's token.
import { signedForTest, testOperatorKey } from "./support/event-key.ts";
import { formatEventKey } from "../core/event-auth.ts";
import { execFile } from "node:child_process";
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { AuthorizationV1Api, BatchV1Api, CoreV1Api, CustomObjectsApi, type V1ResourceAttributes } from "@kubernetes/client-node";
import type { Context, SQSEvent } from "aws-lambda";
import { parseAllDocuments } from "yaml";
import { encodeKeyEvent, messageGroupId } from "../core/event.ts";
import type { Operator } from "../core/operator.ts";
import { startCluster, type LocalCluster } from "../emulator/cluster.ts";
import { lambdaHandler } from "../functions/adapters/lambda.ts";
import cronTabOperator, { REGISTRY, cronJobName } from "../examples/crontab/operator.ts";
import greetingOperator, { configMapName } from "../examples/greeting/operator.ts";
import { CLUSTER, keyEventOf, type Cr, ready } from "./support/functions-environment.ts";
import { eventually } from "./support/eventually.ts";
import { denied, lambdaGroupKubectl, serviceAccountKubectl, type Kubectl } from "./support/identities.ts";

const execFileAsync = promisify(execFile);
const root = join(import.meta.dirname, "..");
const NS = "demo";
const FUNCTIONS_NS = "crdfn-functions";
const greeting: Operator<unknown> = greetingOperator;
const cronTab: Operator<unknown> = cronTabOperator;

interface Identity {
  name: string;
  user: string;
  groups: string[];
}
/** What the API server sees for a pod (or `kubectl create token`) using the ServiceAccount. */
const serviceAccount = (name: string): Identity => ({
  name: `ServiceAccount ${name}`,
  user: `system:serviceaccount:${FUNCTIONS_NS}:${name}`,
  groups: ["system:serviceaccounts", `system:serviceaccounts:${FUNCTIONS_NS}`, "system:authenticated"],
});
/** What it sees for the Lambda: its IAM role's session, mapped by EKS to the operator's group. */
const lambdaRole = (group: string): Identity => ({
  name: `Lambda role in ${group}`,
  user: `arn:aws:sts::123456789012:assumed-role/crdfn-prod-${group.split(":")[1] ?? ""}-us-east-1/session`,
  groups: [group, "system:authenticated"],
});

type Check = [verb: string, resource: string, name?: string, namespace?: string];
/** `resource` is plural[/subresource][.group]; the namespace is the served one unless named. */
const attributes = ([verb, resource, name, namespace]: Check): V1ResourceAttributes => {
  const [res = "", group = ""] = resource.split(/\.(.*)/s);
  const [plural = "", subresource] = res.split("/");
  return { verb, resource: plural, group, namespace: namespace ?? NS, ...(subresource ? { subresource } : {}), ...(name ? { name } : {}) };
};

const commonDenied: Check[] = [
  ["get", "secrets"],
  ["list", "secrets"],
  ["create", "pods"],
  ["watch", "configmaps"],
  ["patch", "events"],
  ["create", "rolebindings.rbac.authorization.k8s.io"],
  ["escalate", "clusterroles.rbac.authorization.k8s.io"],
  ["impersonate", "serviceaccounts"],
  ["create", "customresourcedefinitions.apiextensions.k8s.io"],
  // Nothing in a namespace it does not serve: kube-system (never listed here) and another.
  ["get", "configmaps", "aws-auth", "kube-system"],
  ["list", "configmaps", undefined, "kube-system"],
  ["get", "secrets", undefined, "kube-system"],
  ["create", "events.events.k8s.io", undefined, "kube-system"],
  ["create", "configmaps", undefined, "unserved"],
];

const expectations: Array<{ identities: Identity[]; allowed: Check[]; denied: Check[] }> = [
  {
    identities: [serviceAccount("crdfn-greeting"), lambdaRole("crdfn:greeting")],
    allowed: [
      ["get", "greetings.example.com"],
      ["update", "greetings/status.example.com"],
      ["update", "greetings/finalizers.example.com"],
      // Any ConfigMap by RBAC (names derive from the Greeting's); the admission policy then
      // requires a controller owner reference to a Greeting (test/deploy-generate.test.ts).
      ["create", "configmaps"],
      ["patch", "configmaps", "hello-greeting"],
      // Pruning: a delete with the uid precondition the bridge's event names.
      ["delete", "configmaps", "hello-greeting"],
      ["create", "events.events.k8s.io"],
      ["get", "events.events.k8s.io"],
      ["patch", "events.events.k8s.io"],
    ],
    denied: [
      ...commonDenied,
      // Its own resource: no list/watch (the bridge's job), no spec writes (no finalizer: no patch), no deletes.
      ["patch", "greetings/status.example.com"],
      ["list", "greetings.example.com"],
      ["watch", "greetings.example.com"],
      ["update", "greetings.example.com"],
      ["patch", "greetings.example.com"],
      ["delete", "greetings.example.com"],
      // Its owned kind, which it does not observe: no reads at all (the event names its children).
      ["get", "configmaps", "hello-greeting"],
      ["list", "configmaps"],
      // Other operators' resources and kinds.
      ["get", "crontabs.stable.example.com"],
      ["patch", "crontabs/status.stable.example.com"],
      ["patch", "cronjobs.batch"],
    ],
  },
  {
    identities: [serviceAccount("crdfn-crontab"), lambdaRole("crdfn:crontab")],
    allowed: [
      ["get", "crontabs.stable.example.com"],
      ["patch", "crontabs.stable.example.com"],
      ["update", "crontabs/status.stable.example.com"],
      ["update", "crontabs/finalizers.stable.example.com"],
      ["create", "cronjobs.batch"],
      ["patch", "cronjobs.batch", "nightly-cron"],
      ["delete", "cronjobs.batch", "nightly-cron"],
      ["get", "configmaps", REGISTRY],
      ["create", "configmaps", REGISTRY],
      ["patch", "configmaps", REGISTRY],
      ["delete", "cronjobs.batch"],
      ["create", "events.events.k8s.io"],
      ["patch", "events.events.k8s.io"],
    ],
    denied: [
      ...commonDenied,
      ["list", "crontabs.stable.example.com"],
      ["list", "cronjobs.batch"],
      ["get", "cronjobs.batch", "nightly-cron"],
      // The registry by name only.
      ["get", "configmaps", "aws-auth"],
      ["delete", "crontabs.stable.example.com"],
      ["update", "crontabs.stable.example.com"],
      ["get", "greetings.example.com"],
      ["patch", "greetings/status.example.com"],
    ],
  },
];

/**
 * The kubectl commands of README's Deploying block (its first sh block, whatever its fence's
 * annotations) up to and including its server-side dry run, split into arguments (they quote
 * nothing), without their comments.
 */
function documentedDryRun(): string[][] {
  const readme = readFileSync(join(root, "README.md"), "utf8");
  const block = /^## Deploying$[\s\S]*?^```sh(?: [^\n]*)?$([\s\S]*?)^```$/m.exec(readme)?.[1] ?? "";
  const lines = block
    .split("\n")
    .map((l) => l.replace(/\s+#.*$/, "").trim())
    .filter((l) => l.startsWith("kubectl "));
  const dryRun = lines.findIndex((l) => l.includes("--dry-run=server"));
  assert.ok(dryRun >= 0, `README's Deploying block has a server-side dry run: ${lines.join(" | ")}`);
  return lines.slice(0, dryRun + 1).map((l) => l.split(/\s+/).slice(1));
}

describe("Kubernetes deploy manifests", { timeout: 240_000 }, () => {
  let cluster: LocalCluster;
  let kubectl: Kubectl;
  let custom: CustomObjectsApi;
  let core: CoreV1Api;

  before(async () => {
    cluster = await startCluster({ queue: false, log: () => {} });
    kubectl = async (args, input) => {
      const child = execFileAsync(cluster.kubectl, ["--kubeconfig", cluster.kubeconfigPath, ...args], {
        cwd: root,
        timeout: 90_000,
        maxBuffer: 16 * 1024 * 1024,
      });
      if (input !== undefined) child.child.stdin?.end(input);
      return (await child).stdout;
    };
    custom = cluster.kubeConfig.makeApiClient(CustomObjectsApi);
    core = cluster.kubeConfig.makeApiClient(CoreV1Api);
  });

  after(async () => {
    await cluster?.stop();
  });

  /**
   * A dry run cannot create a namespace for the namespaced objects that follow it, so the
   * tree's own Namespace objects are applied for real first (as `kubectl apply -k` would).
   */
  async function dryRun(dir: string): Promise<Array<{ kind: string; metadata: { name: string } }>> {
    const built = await kubectl(["kustomize", dir]);
    const objects = parseAllDocuments(built).map((d) => d.toJS() as { kind: string; metadata: { name: string } });
    assert.ok(objects.length > 0, `${dir} builds`);
    const namespaces = objects.filter((o) => o.kind === "Namespace");
    for (const ns of namespaces)
      await kubectl(["apply", "--server-side", "-f", "-"], JSON.stringify({ apiVersion: "v1", kind: "Namespace", metadata: { name: ns.metadata.name } }));
    const out = await kubectl(["apply", "--server-side", "--dry-run=server", "-k", dir]);
    for (const o of objects) assert.match(out, new RegExp(`/${o.metadata.name} serverside-applied \\(server dry run\\)`), `${o.kind} ${o.metadata.name}`);
    return objects;
  }

  it("runs README's Deploying steps up to their server-side dry run, verbatim, on a fresh cluster without crdfn's namespaces: exit 0, every object of infra/generated checked", async () => {
    // The namespaces it serves are the user's: they exist before crdfn's grants in them do.
    await kubectl(["create", "namespace", NS]);
    for (const ns of ["crdfn-system", FUNCTIONS_NS]) await assert.rejects(kubectl(["get", "namespace", ns]), /NotFound/, `${ns} before the steps`);
    // The user's project with its out folder `deploy`: this checkout's infra/generated.
    const project = mkdtempSync(join(tmpdir(), "crdfn-deploy-steps-"));
    try {
      cpSync(join(root, "infra", "generated"), join(project, "deploy"), { recursive: true });
      const steps = documentedDryRun();
      let out = "";
      for (const args of steps) {
        const done = await execFileAsync(cluster.kubectl, ["--kubeconfig", cluster.kubeconfigPath, ...args], {
          cwd: project,
          timeout: 90_000,
          maxBuffer: 16 * 1024 * 1024,
        }).catch((e: { code?: number; stderr?: string }) => assert.fail(`kubectl ${args.join(" ")}: exit ${e.code}: ${e.stderr}`));
        out = done.stdout;
      }
      const objects = parseAllDocuments(await kubectl(["kustomize", "infra/generated"])).map((d) => d.toJS() as { kind: string; metadata: { name: string } });
      for (const o of objects) assert.match(out, new RegExp(`/${o.metadata.name} serverside-applied \\(server dry run\\)`), `${o.kind} ${o.metadata.name}`);
      const crds = objects.filter((o) => o.kind === "CustomResourceDefinition").map((o) => `${o.metadata.name}.yaml`);
      assert.deepEqual(crds.sort(), readdirSync(join(root, "infra/generated/crds")).sort());
    } finally {
      rmSync(project, { recursive: true, force: true });
    }
    await assert.rejects(kubectl(["get", "crd", "greetings.example.com"]), /NotFound/);
  });

  it("installs the CRDs from infra/generated/crds", async () => {
    await kubectl(["apply", "--server-side", "-f", "infra/generated/crds/"]);
    await kubectl(["wait", "--for=condition=Established", "--timeout=60s", "-f", "infra/generated/crds/"]);
  });

  it("passes a server-side dry run of infra/generated/functions, persisting nothing", async () => {
    await dryRun("infra/generated/functions");
    await assert.rejects(kubectl(["get", "clusterrole", "crdfn-greeting-function"]), /NotFound/);
    await assert.rejects(kubectl(["get", "validatingadmissionpolicy", "crdfn-greeting-function"]), /NotFound/);
  });

  it("passes a server-side dry run of infra/generated/bridge", async () => {
    await dryRun("infra/generated/bridge");
  });

  it("applies infra/generated/functions", async () => {
    await kubectl(["apply", "--server-side", "-k", "infra/generated/functions"]);
  });

  it('grants exactly what docs/security.md\'s "What each generated identity may do" prints (kubectl auth can-i --list, live)', async () => {
    const readme = readFileSync(join(root, "docs", "security.md"), "utf8");
    const section = readme.slice(readme.indexOf("## What each generated identity may do"));
    const block = /```text\n([\s\S]*?)```/.exec(section)?.[1] ?? "";
    // Each "$ kubectl auth can-i --list …" in the README, run against the API server, must print its rows.
    const runs = block.split(/^\$ /m).filter((b) => b.trim() !== "");
    assert.ok(runs.length >= 2, "the README shows the identities' grants");
    // Resource rows only: the discovery (non-resource URL) and self-review rows every identity has are left out.
    const rows = (text: string) =>
      text
        .split("\n")
        .slice(1)
        .map((l) => l.trim().split(/\s{2,}/))
        .filter(([resource = ""]) => resource !== "" && resource !== "Resources" && !resource.startsWith("[") && !resource.startsWith("selfsubject"))
        .map((cells) => cells.join(" "))
        .sort();
    for (const run of runs) {
      const [command = "", ...printed] = run.trimEnd().split("\n");
      const args = command.replace(/^kubectl /, "").split(" ");
      const live = await kubectl(args);
      assert.deepEqual(rows(["", ...printed].join("\n")), rows(live), `README out of date for: ${command}\n--- live:\n${live}`);
    }
  });

  it("lets the examples' identities write nothing in kube-system or the bridge's namespace (RBAC: not served) nor onto unowned ConfigMaps (admission policy)", async () => {
    await kubectl(["apply", "--server-side", "-f", "infra/generated/bridge/namespace.yaml"]);
    await kubectl(["apply", "--server-side", "-f", "infra/generated/bridge/configmap.yaml"]);
    await kubectl(["create", "configmap", "victim-greeting", "-n", NS, "--from-literal=mine=yes"]);
    const identities: Array<[string, Kubectl]> = [
      ["ServiceAccount crdfn-greeting", await serviceAccountKubectl(cluster, kubectl, "crdfn-greeting", FUNCTIONS_NS)],
      ["Lambda group crdfn:greeting", lambdaGroupKubectl(cluster, "greeting")],
      ["Lambda group crdfn:crontab", lambdaGroupKubectl(cluster, "crontab")],
    ];
    const apply = (k: Kubectl, ns: string, name: string) =>
      k(
        ["apply", "--server-side", "--force-conflicts", "--field-manager=crdfn", "-f", "-"],
        JSON.stringify({ apiVersion: "v1", kind: "ConfigMap", metadata: { name, namespace: ns }, data: { mapRoles: "- groups: [system:masters]" } }),
      );
    // Wait for the policies to take effect with server-side dry runs, which admission sees but
    // which write nothing: a real apply accepted before then would leave aws-auth behind.
    const dryRun = (k: Kubectl, ns: string, name: string) =>
      k(
        ["apply", "--server-side", "--dry-run=server", "--force-conflicts", "--field-manager=crdfn", "-f", "-"],
        JSON.stringify({ apiVersion: "v1", kind: "ConfigMap", metadata: { name, namespace: ns } }),
      );
    for (const [, k] of identities) {
      await eventually(async () => assert.equal((await denied(dryRun(k, NS, "victim-greeting"))).by, "admission policy"), {
        timeoutMs: 30_000,
        intervalMs: 500,
      });
    }
    for (const [who, k] of identities) {
      for (const [what, attack, by, message] of [
        [
          "server-side apply kube-system/aws-auth",
          () => apply(k, "kube-system", "aws-auth"),
          "RBAC",
          /cannot (patch|create) resource "configmaps".* in the namespace "kube-system"/,
        ],
        ["rewrite crdfn-system/crdfn-bridge-examples", () => apply(k, "crdfn-system", "crdfn-bridge-examples"), "RBAC", /in the namespace "crdfn-system"/],
        [
          `take over ${NS}/victim-greeting`,
          () => apply(k, NS, "victim-greeting"),
          "admission policy",
          /may write configmaps only with a controller owner reference/,
        ],
      ] as const) {
        const d = await denied(attack());
        console.log(`- ${who}: ${what} → ${d.by}: ${d.message}`);
        assert.equal(d.by, by, `${who}: ${what}`);
        assert.match(d.message, message);
      }
    }
    assert.deepEqual(JSON.parse(await kubectl(["get", "configmap", "victim-greeting", "-n", NS, "-o", "jsonpath={.data}"])), { mine: "yes" });
    await assert.rejects(kubectl(["get", "configmap", "aws-auth", "-n", "kube-system"]), /NotFound/);
  });

  it("lets each function identity touch only its resource, its status, its owned kinds and events", async () => {
    const authz = cluster.kubeConfig.makeApiClient(AuthorizationV1Api);
    const wrong: string[] = [];
    let reviews = 0;
    for (const { identities, allowed, denied } of expectations) {
      for (const who of identities) {
        const cases = [...allowed.map((c) => [c, true] as const), ...denied.map((c) => [c, false] as const)];
        await Promise.all(
          cases.map(async ([check, expected]) => {
            const review = await authz.createSubjectAccessReview({
              body: {
                apiVersion: "authorization.k8s.io/v1",
                kind: "SubjectAccessReview",
                spec: { user: who.user, groups: who.groups, resourceAttributes: attributes(check) },
              },
            });
            reviews += 1;
            if (review.status?.allowed !== expected) wrong.push(`${who.name}: ${check.join(" ")} should be ${expected ? "allowed" : "denied"}`);
          }),
        );
      }
    }
    console.log(`${reviews} SubjectAccessReviews`);
    assert.deepEqual(wrong, []);
  });

  // ---- the operators, run with nothing but their ServiceAccount's token ----------------------

  async function handlerAs(serviceAccountName: string, op: Operator<unknown>) {
    const token = (await kubectl(["create", "token", serviceAccountName, "-n", FUNCTIONS_NS, "--duration=10m"])).trim();
    const handler = lambdaHandler(op, {
      env: {
        CRDFN_CLUSTER: CLUSTER,
        CRDFN_KUBE_AUTH: "token",
        CRDFN_KUBE_SERVER: cluster.server,
        CRDFN_KUBE_CA_FILE: cluster.caPath,
        CRDFN_KUBE_TOKEN: token,
        CRDFN_EVENT_KEYS: formatEventKey(testOperatorKey(op.resource)),
        LOG_LEVEL: "silent",
      },
    });
    /** Delivers the key event for `name`'s current state the way Lambda's SQS trigger would; returns the failed ids. */
    return async (name: string): Promise<string[]> => {
      const obj = (await getCr(op, name)) ?? { metadata: { name, namespace: NS } };
      const event = keyEventOf(op, obj);
      const sqsEvent: SQSEvent = {
        Records: [
          {
            messageId: `${name}-${obj.metadata?.resourceVersion ?? "gone"}`,
            receiptHandle: "r",
            body: encodeKeyEvent(signedForTest(event)),
            attributes: {
              ApproximateReceiveCount: "1",
              MessageGroupId: messageGroupId(event),
              SentTimestamp: "0",
              SenderId: "bridge",
              ApproximateFirstReceiveTimestamp: "0",
            },
            messageAttributes: {},
            md5OfBody: "",
            eventSource: "aws:sqs",
            eventSourceARN: "arn:aws:sqs:us-east-1:123456789012:crdfn-test.fifo",
            awsRegion: "us-east-1",
          },
        ],
      };
      const out = await handler(sqsEvent, { getRemainingTimeInMillis: () => 30_000 } as Context);
      return out.batchItemFailures.map((f) => f.itemIdentifier);
    };
  }

  const crBase = (op: Operator<unknown>) => ({ group: op.resource.group, version: op.resource.version, plural: op.resource.plural, namespace: NS });
  async function getCr(op: Operator<unknown>, name: string): Promise<Cr | undefined> {
    try {
      return (await custom.getNamespacedCustomObject({ ...crBase(op), name })) as Cr;
    } catch (e) {
      if ((e as { code?: number }).code === 404) return undefined;
      throw e;
    }
  }
  const createCr = (op: Operator<unknown>, name: string, spec: Record<string, unknown>) =>
    custom.createNamespacedCustomObject({ ...crBase(op), body: { apiVersion: op.apiVersion, kind: op.resource.kind, metadata: { name }, spec } });

  it("Greeting reconciles as crdfn-greeting: ConfigMap applied, status written, a Warning Event recorded", async () => {
    const deliver = await handlerAs("crdfn-greeting", greeting);
    await createCr(greeting, "hello", { message: "hi" });
    assert.deepEqual(await deliver("hello"), []);
    const cm = await core.readNamespacedConfigMap({ name: configMapName("hello"), namespace: NS });
    assert.equal(cm.data?.message, "hi");
    assert.equal(cm.metadata?.ownerReferences?.[0]?.name, "hello");
    assert.equal(ready(await getCr(greeting, "hello"))?.status, "True");

    // A spec the operator rejects: Ready=False and an Event, written with the same identity.
    await createCr(greeting, "padded", { message: "hi " });
    assert.deepEqual(await deliver("padded"), []);
    assert.equal(ready(await getCr(greeting, "padded"))?.reason, "InvalidSpec");
    const events = await core.listNamespacedEvent({ namespace: NS, fieldSelector: "involvedObject.name=padded" });
    assert.deepEqual(
      events.items.map((e) => e.reason),
      ["InvalidSpec"],
    );
  });

  it("CronTab reconciles and finalizes as crdfn-crontab: CronJob applied, registry entry written and withdrawn", async () => {
    const op = cronTab;
    const deliver = await handlerAs("crdfn-crontab", op);
    await createCr(op, "nightly", { cronSpec: "0 3 * * *", image: "busybox", replicas: 2 });
    assert.deepEqual(await deliver("nightly"), []);
    const job = await cluster.kubeConfig.makeApiClient(BatchV1Api).readNamespacedCronJob({ name: cronJobName("nightly"), namespace: NS });
    assert.equal(job.spec?.schedule, "0 3 * * *");
    assert.equal((await core.readNamespacedConfigMap({ name: REGISTRY, namespace: NS })).data?.nightly, "0 3 * * *");
    const current = await getCr(op, "nightly");
    assert.equal(ready(current)?.status, "True");
    assert.deepEqual(current?.metadata?.finalizers, [cronTab.finalizer]);

    await custom.deleteNamespacedCustomObject({ ...crBase(op), name: "nightly" });
    assert.deepEqual(await deliver("nightly"), []);
    assert.equal(await getCr(op, "nightly"), undefined, "finalizer removed, object gone");
    assert.equal((await core.readNamespacedConfigMap({ name: REGISTRY, namespace: NS })).data?.nightly, undefined);
  });
});
