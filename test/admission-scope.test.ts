// Where the generated admission policies hold, proven by attack with a function's real token. They
// are two per operator, each selected by kind and namespace (deploy/admission.ts), so that the
// function's status writes and Events in a namespace it may write in pay for no policy at all: this
// proves the narrower selection refuses every write the single policy matching every write did.
// Two deployments of a ConfigMap-owning kind: one serving every namespace (one ClusterRole, where
// only the namespace policy keeps the function out of the denied namespaces), and one serving one
// namespace whose function an admin has wrongly granted a ClusterRole (where only the namespace
// policy keeps it out of the others).
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { z } from "zod";
import { untilAdmissionInForce } from "../cli/local/admission-in-force.ts";
import { KubeHttp } from "../clients/kube-http.ts";
import { defineOperator, type Operator } from "../core/operator.ts";
import { admissionPolicyOf } from "../deploy/admission.ts";
import { crdOf } from "../deploy/crd.ts";
import { clusterRoleOf, functionIdentity, functionRbacOf } from "../deploy/rbac.ts";
import { adminKubectl, denied, serviceAccountKubectl, type Kubectl } from "./support/identities.ts";
import { testCluster, type TestCluster } from "./support/test-cluster.ts";

const GROUP = "admission-scope.crdfn.dev";
const kindNamed = (kind: string): Operator<unknown> =>
  defineOperator({
    resource: { group: GROUP, version: "v1", plural: `${kind.toLowerCase()}s`, kind },
    spec: z.object({ text: z.string() }),
    owns: [{ group: "", version: "v1", kind: "ConfigMap" }],
    reconcile: () => ({}),
  });
const everywhere = kindNamed("Note");
const oneNamespace = kindNamed("Memo");

describe("the admission policies' scope, by attack with the function's real token", { timeout: 240_000 }, () => {
  let cluster: TestCluster;
  let admin: Kubectl;
  let open: string, guarded: string, other: string, fns: string;
  const as: Record<string, Kubectl> = {};

  const parent = (op: Operator<unknown>, namespace: string, name: string) => ({
    apiVersion: `${GROUP}/v1`,
    kind: op.resource.kind,
    metadata: { name, namespace },
    spec: { text: "hi" },
  });
  const child = (op: Operator<unknown>, p: { metadata: { uid?: string; name: string; namespace: string } } | undefined, namespace: string, name: string) => ({
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: {
      name,
      namespace,
      ...(p ? { ownerReferences: [{ apiVersion: `${GROUP}/v1`, kind: op.resource.kind, name: p.metadata.name, uid: p.metadata.uid, controller: true }] } : {}),
    },
    data: { text: "hi" },
  });
  // events.k8s.io's eventTime is a MicroTime: six digits of fraction, not JavaScript's three.
  const event = (namespace: string, regarding: string) => ({
    apiVersion: "events.k8s.io/v1",
    kind: "Event",
    metadata: { name: `${regarding}.1`, namespace },
    eventTime: new Date().toISOString().replace(/Z$/, "000Z"),
    reportingController: "crdfn",
    reportingInstance: "test",
    action: "Reconcile",
    reason: "Reconciled",
    type: "Normal",
    regarding: { apiVersion: `${GROUP}/v1`, kind: "Note", name: regarding, namespace },
  });
  const create = async (op: Operator<unknown>, namespace: string, name: string) =>
    JSON.parse(await admin(["create", "-o", "json", "-f", "-"], JSON.stringify(parent(op, namespace, name)))) as {
      metadata: { uid: string; name: string; namespace: string; resourceVersion: string };
    };
  const writeStatus = (k: Kubectl, op: Operator<unknown>, p: { metadata: { name: string; namespace: string; resourceVersion: string } }) =>
    k(
      ["replace", "--subresource=status", "-o", "json", "-f", "-"],
      JSON.stringify({ ...parent(op, p.metadata.namespace, p.metadata.name), metadata: p.metadata, status: { phase: "Ready" } }),
    );

  /** The attack was refused by an admission policy, in these words. */
  const refusedByPolicy = async (what: string, attack: Promise<unknown>, words: RegExp): Promise<void> => {
    const d = await denied(attack);
    assert.equal(d.by, "admission policy", what);
    assert.match(d.message, words, what);
  };

  before(async () => {
    cluster = await testCluster({ file: import.meta.filename, namespaces: ["guarded", "other", "fns"] });
    admin = adminKubectl(cluster);
    [open, guarded, other, fns] = [cluster.namespace, cluster.ns("guarded"), cluster.ns("other"), cluster.ns("fns")];
    for (const op of [everywhere, oneNamespace]) await admin(["apply", "--server-side", "-f", "-"], JSON.stringify(crdOf(op)));
    await admin(["wait", "--for=condition=Established", "--timeout=60s", `crd/notes.${GROUP}`, `crd/memos.${GROUP}`]);
    const manifests = [
      ...functionRbacOf(everywhere, { functionsNamespace: fns, namespaces: [] }),
      ...admissionPolicyOf(everywhere, { functionsNamespace: fns, namespaces: [], denied: [guarded, fns] }),
      ...functionRbacOf(oneNamespace, { functionsNamespace: fns, namespaces: [open] }),
      ...admissionPolicyOf(oneNamespace, { functionsNamespace: fns, namespaces: [open], denied: [fns] }),
      // The admin's mistake: the served function's grants bound cluster-wide.
      clusterRoleOf(oneNamespace, `${cluster.namespace}-mistake`),
      {
        apiVersion: "rbac.authorization.k8s.io/v1",
        kind: "ClusterRoleBinding",
        metadata: { name: `${cluster.namespace}-mistake` },
        roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: `${cluster.namespace}-mistake` },
        subjects: [{ kind: "ServiceAccount", name: functionIdentity(oneNamespace, fns).serviceAccount, namespace: fns }],
      },
    ];
    await admin(["apply", "--server-side", "-f", "-"], JSON.stringify({ apiVersion: "v1", kind: "List", items: manifests }));
    await untilAdmissionInForce(new KubeHttp({ connection: cluster.kubeConfig }), { probe: `${cluster.namespace}-probe`, namespace: open });
    for (const op of [everywhere, oneNamespace])
      as[op.resource.kind] = await serviceAccountKubectl(cluster, admin, functionIdentity(op, fns).serviceAccount, fns);
  });
  after(async () => {
    for (const kind of ["clusterrolebinding", "clusterrole"])
      await admin?.(["delete", kind, `${cluster.namespace}-mistake`, "--ignore-not-found"]).catch(() => undefined);
    await cluster?.stop();
  });

  it("serving every namespace: the function writes its status, children and Events where it may, and nothing in a denied namespace", async () => {
    const k = as.Note!;
    const mine = await create(everywhere, open, "mine");
    const theirs = await create(everywhere, guarded, "theirs");
    // Allowed: selected by no policy (its status), by the ownership policy alone (its child).
    await writeStatus(k, everywhere, mine);
    await k(["create", "-f", "-"], JSON.stringify(child(everywhere, mine, open, "mine-note")));
    await k(["create", "-f", "-"], JSON.stringify(event(open, "mine")));
    // Refused, each by the policy that says why.
    const attacks: Array<[string, () => Promise<unknown>, RegExp]> = [
      [`status of ${guarded}/theirs`, () => writeStatus(k, everywhere, theirs), new RegExp(`may never write in namespace ${guarded}`)],
      [
        `a child in ${guarded}`,
        () => k(["create", "-f", "-"], JSON.stringify(child(everywhere, theirs, guarded, "theirs-note"))),
        new RegExp(`may never write in namespace ${guarded}`),
      ],
      [
        `an Event in ${guarded}`,
        () => k(["create", "-f", "-"], JSON.stringify(event(guarded, "theirs"))),
        new RegExp(`may never write in namespace ${guarded}`),
      ],
      [
        `a ConfigMap in ${fns}`,
        () => k(["create", "-f", "-"], JSON.stringify(child(everywhere, mine, fns, "planted"))),
        new RegExp(`may never write in namespace ${fns}`),
      ],
      [
        `an unowned ConfigMap in ${open}`,
        () => k(["create", "-f", "-"], JSON.stringify(child(everywhere, undefined, open, "unowned"))),
        /may write configmaps only with a controller owner reference/,
      ],
    ];
    for (const [what, attack, words] of attacks) await refusedByPolicy(what, attack(), words);
    // The state of the world: only the allowed writes landed.
    const status = JSON.parse(await admin(["get", "notes", "-n", open, "mine", "-o", "json"])) as { status?: { phase?: string } };
    assert.equal(status.status?.phase, "Ready");
    const elsewhere = JSON.parse(await admin(["get", "notes", "-n", guarded, "theirs", "-o", "json"])) as { status?: unknown };
    assert.equal(elsewhere.status, undefined);
    for (const [ns, name] of [
      [guarded, "theirs-note"],
      [fns, "planted"],
      [open, "unowned"],
    ] as const)
      await assert.rejects(admin(["get", "configmap", name, "-n", ns]), /NotFound/, `${ns}/${name}`);
    await admin(["get", "configmap", "mine-note", "-n", open]);
  });

  it("serving one namespace, with RBAC granted too widely: the namespace policy still keeps the function out of the others", async () => {
    const k = as.Memo!;
    const mine = await create(oneNamespace, open, "mine");
    const theirs = await create(oneNamespace, other, "theirs");
    await writeStatus(k, oneNamespace, mine);
    await k(["create", "-f", "-"], JSON.stringify(child(oneNamespace, mine, open, "mine-memo")));
    const words = new RegExp(`does not serve namespace ${other}`);
    await refusedByPolicy(`status of ${other}/theirs`, writeStatus(k, oneNamespace, theirs), words);
    await refusedByPolicy(`a child in ${other}`, k(["create", "-f", "-"], JSON.stringify(child(oneNamespace, theirs, other, "theirs-memo"))), words);
    await assert.rejects(admin(["get", "configmap", "theirs-memo", "-n", other]), /NotFound/);
    await admin(["get", "configmap", "mine-memo", "-n", open]);
  });
});
