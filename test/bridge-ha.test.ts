import { describe, it, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { parse } from "yaml";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { SQSClient } from "@aws-sdk/client-sqs";
import { CoreV1Api } from "@kubernetes/client-node";
import type { LocalCluster } from "../emulator/types.ts";
import { bridgeEnv, type BridgeProcess, spawnBridge, startBridgeEnvironment } from "./support/bridge-environment.ts";
import type { TestCluster } from "./support/test-cluster.ts";
import { crontab, crontabPath, ensureNamespace } from "./support/crontabs.ts";
import { kube, kubectl, ok } from "./support/kube-requests.ts";
import { scrapeMetrics } from "./support/metrics.ts";
import { parallel, withTimeout } from "./support/promises.ts";
import { QueueReader } from "./support/queue-reader.ts";

// infra/generated/bridge is this repository's project "examples": its bridge is crdfn-bridge-examples.
/**
 * A standby takes the Lease once it has seen it unchanged for the lease duration (8 s), at its
 * next retry (every 1.6–1.9 s); the last renewal it saw may be one retry old. So 8 + 2 × 1.9 s ≈
 * 12 s at worst, measured 8–9 s; the bound leaves room for the requests of a machine loaded to
 * 4× its cores.
 */
const TAKEOVER_MS = 20_000;
const SA = "system:serviceaccount:crdfn-system:crdfn-bridge-examples";

/** `kubectl auth can-i` answers on stdout and signals "no" with exit code 1. */
function canI(cluster: LocalCluster, ...args: string[]): string {
  try {
    return execFileSync(cluster.kubectl, ["--kubeconfig", cluster.kubeconfigPath, "auth", "can-i", ...args, `--as=${SA}`], {
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"],
    }).trim();
  } catch (e) {
    return String((e as { stdout?: string }).stdout ?? "").trim();
  }
}

async function leaseHolder(cluster: LocalCluster, name: string): Promise<string> {
  const r = await kube(cluster.kubeConfig, "GET", `/apis/coordination.k8s.io/v1/namespaces/crdfn-system/leases/${name}`);
  return r.status === 200 ? String((r.body.spec as { holderIdentity?: string } | undefined)?.holderIdentity ?? "") : "";
}

async function scrape(port: number, metric: string): Promise<number> {
  return (await scrapeMetrics(port)).get(metric) ?? 0;
}

async function waitFor(check: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out: ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe("bridge: deployment identity and high availability", { timeout: 300_000 }, () => {
  let env: Awaited<ReturnType<typeof startBridgeEnvironment>>;
  let cluster: TestCluster;
  let sqs: SQSClient;
  let reader: QueueReader;

  before(async () => {
    env = await startBridgeEnvironment({ file: import.meta.filename, namespaces: ["ha"] });
    ({ cluster, sqs } = env);
    reader = new QueueReader(sqs, cluster.sqs.queues.fifo);
  });

  after(async () => env?.stop());

  it("infra/generated/bridge passes a server-side dry run against the real API server", { timeout: 60_000 }, async () => {
    // A dry run creates nothing, so the namespaces the other objects live in must exist first:
    // the bridge's own, and the ones the deploy settings serve (its Roles live there; they are the user's).
    kubectl(cluster, "apply", "--server-side", "-f", "infra/generated/bridge/namespace.yaml");
    const served = (parse(readFileSync("crdfn.deploy.yaml", "utf8")) as { namespaces: string[] }).namespaces;
    for (const ns of served) await ensureNamespace(cluster, ns);
    const out = kubectl(cluster, "apply", "--server-side", "--dry-run=server", "-k", "infra/generated/bridge");
    for (const kind of [
      "serviceaccount/crdfn-bridge-examples",
      "role.rbac.authorization.k8s.io/crdfn-bridge-examples",
      "role.rbac.authorization.k8s.io/crdfn-bridge-examples-lease",
      "configmap/crdfn-bridge-examples",
      "deployment.apps/crdfn-bridge-examples",
    ]) {
      assert.match(out, new RegExp(`${kind.replace(/\./g, "\\.")} serverside-applied \\(server dry run\\)`));
    }
    // Serving listed namespaces, the bridge's every grant is a Role in one of them.
    assert.doesNotMatch(out, /clusterrole/);
  });

  it("runs as its own process with the token of the ServiceAccount from infra/generated/bridge, which cannot read Secrets", { timeout: 90_000 }, async () => {
    const served = (parse(readFileSync("crdfn.deploy.yaml", "utf8")) as { namespaces: string[] }).namespaces;
    for (const ns of served) await ensureNamespace(cluster, ns);
    kubectl(cluster, "apply", "--server-side", "-k", "infra/generated/bridge");
    const core = cluster.kubeConfig.makeApiClient(CoreV1Api);
    const token = await core.createNamespacedServiceAccountToken({
      name: "crdfn-bridge-examples",
      namespace: "crdfn-system",
      body: { spec: { audiences: [], expirationSeconds: 3600 } },
    });
    const dir = mkdtempSync(join(tmpdir(), "crdfn-bridge-sa-"));
    const tokenFile = join(dir, "token");
    writeFileSync(tokenFile, token.status?.token ?? "");

    assert.equal(canI(cluster, "get", "secrets", "--all-namespaces"), "no");
    assert.equal(canI(cluster, "list", "secrets", "-n", "crdfn-system"), "no");
    assert.equal(canI(cluster, "update", "crontabs.stable.example.com", "--all-namespaces"), "no");
    // It watches what it serves (crdfn.deploy.yaml's namespaces), and nothing beyond them.
    assert.equal(canI(cluster, "watch", "crontabs.stable.example.com", "--all-namespaces"), "no");
    for (const served of ["default", "demo"]) {
      assert.equal(canI(cluster, "watch", "crontabs.stable.example.com", "-n", served), "yes");
      assert.equal(canI(cluster, "watch", "cronjobs.batch", "-n", served), "yes");
      assert.equal(canI(cluster, "update", "crontabs.stable.example.com", "-n", served), "no");
      assert.equal(canI(cluster, "list", "secrets", "-n", served), "no");
    }
    assert.equal(canI(cluster, "watch", "crontabs.stable.example.com", "-n", "kube-system"), "no");
    assert.equal(canI(cluster, "update", "leases.coordination.k8s.io/crdfn-bridge-examples", "-n", "crdfn-system"), "yes");
    assert.equal(canI(cluster, "update", "leases.coordination.k8s.io/other", "-n", "crdfn-system"), "no");

    // A served namespace, and a name no other file on a shared cluster uses.
    const ns = "demo";
    const seen = `seen-as-sa-${process.pid}`;
    // No kubeconfig: the server, its CA and the token file, as a bridge outside the cluster runs.
    const { KUBECONFIG: _admin, ...env } = bridgeEnv(cluster, {
      CRDFN_NAMESPACES: served.join(","),
      CRDFN_LEASE_NAME: "crdfn-bridge-examples",
      CRDFN_LEASE_NAMESPACE: "crdfn-system",
    });
    const bridge = spawnBridge({ ...env, CRDFN_KUBE_SERVER: cluster.server, CRDFN_KUBE_CA_FILE: cluster.caPath, CRDFN_KUBE_TOKEN_FILE: tokenFile, HOME: dir });
    try {
      await withTimeout(bridge.synced, 30_000, `sync as the ServiceAccount; logs: ${bridge.logs.join("\n")}`);
      assert.equal((await leaseHolder(cluster, "crdfn-bridge-examples")) !== "", true, "it holds its Lease");
      await ok(kube(cluster.kubeConfig, "POST", crontabPath(ns), crontab(seen)), "create");
      await reader.until(() => reader.byName(ns).has(seen), 20_000);
    } finally {
      await kube(cluster.kubeConfig, "DELETE", `${crontabPath(ns)}/${seen}`);
      bridge.child.kill("SIGTERM");
      assert.equal(await bridge.exited, 0);
      rmSync(dir, { recursive: true, force: true });
    }
    assert.equal(await leaseHolder(cluster, "crdfn-bridge-examples"), "", "stop releases the Lease");
  });

  it(`two replicas: exactly one publishes; SIGKILL it and the other takes over within ${TAKEOVER_MS / 1000} s`, { timeout: 120_000 }, async () => {
    const ns = cluster.ns("ha");
    const lease = "crdfn-ha";
    const replicas = new Map<string, BridgeProcess>();
    for (const id of ["replica-a", "replica-b"]) {
      replicas.set(
        id,
        spawnBridge(bridgeEnv(cluster, { CRDFN_NAMESPACES: ns, CRDFN_LEASE_NAME: lease, CRDFN_LEASE_NAMESPACE: "crdfn-system", CRDFN_LEASE_IDENTITY: id })),
      );
    }
    try {
      await waitFor(async () => (await leaseHolder(cluster, lease)) !== "", 30_000, "a leader");
      const leaderId = await leaseHolder(cluster, lease);
      const standbyId = leaderId === "replica-a" ? "replica-b" : "replica-a";
      const leader = replicas.get(leaderId);
      const standby = replicas.get(standbyId);
      assert.ok(leader !== undefined && standby !== undefined);
      await withTimeout(leader.synced, 30_000, "leader sync");

      const names = Array.from({ length: 20 }, (_, i) => `ct-${i}`);
      await parallel(names, 10, (name) => ok(kube(cluster.kubeConfig, "POST", crontabPath(ns), crontab(name)), name));
      await reader.until(() => names.every((n) => reader.byName(ns).has(n)), 20_000);
      const [leaderPort, standbyPort] = await Promise.all([leader.port, standby.port]);
      assert.ok((await scrape(leaderPort, "crdfn_bridge_events_published_total")) >= 20);
      assert.equal(await scrape(standbyPort, "crdfn_bridge_events_published_total"), 0, "the standby publishes nothing");
      assert.equal(await scrape(standbyPort, "crdfn_bridge_leader"), 0);
      assert.equal((await fetch(`http://127.0.0.1:${standbyPort}/readyz`)).status, 200, "a standby is ready");
      assert.equal((await fetch(`http://127.0.0.1:${leaderPort}/healthz`)).status, 200);
      assert.ok((await scrape(leaderPort, "crdfn_bridge_events_observed_total")) >= 20);
      const perObject = reader.byName(ns);
      assert.ok(
        names.every((n) => perObject.get(n)?.length === 1),
        "each object announced once",
      );

      leader.child.kill("SIGKILL");
      const killedAt = Date.now();
      await ok(kube(cluster.kubeConfig, "POST", crontabPath(ns), crontab("after-kill")), "create after kill");
      await waitFor(async () => (await leaseHolder(cluster, lease)) === standbyId, TAKEOVER_MS + 30_000, "the standby holds the Lease");
      const takeoverMs = Date.now() - killedAt;
      console.log(`# takeover after SIGKILL: ${takeoverMs} ms`);
      assert.ok(takeoverMs <= TAKEOVER_MS, `took over in ${takeoverMs} ms`);
      // The new leader publishes what changed while no one led.
      await reader.until(() => reader.byName(ns).has("after-kill"), 30_000);

      standby.child.kill("SIGTERM");
      assert.equal(await withTimeout(standby.exited, 15_000, "SIGTERM exit"), 0);
      assert.equal(await leaseHolder(cluster, lease), "", "SIGTERM releases the Lease");
    } finally {
      for (const r of replicas.values()) r.child.kill("SIGKILL");
    }
  });
});
