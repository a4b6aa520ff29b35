// Two projects in `crdfn dev --kubeconfig` on one cluster, as two people share a dev cluster: each
// project's dev applies its own bridge identity (crdfn-bridge-<project>, the project named by its
// crdfn.deploy.yaml), so neither replaces the other's Role, and both keep reconciling new objects
// and spec changes across forced watch reconnects (the API server killed with kill -9 and started
// again by `crdfn cluster up`'s supervisor: every watch connection ends). Then: a Role replaced
// under a running bridge is told apart from a refused credential; an object in a namespace its
// operator does not serve gets an Event, a dev line and a `crdfn status` line; and dev's
// short-lived tokens sit in its state folder and are gone after a kill -9 of dev.
//
// CRDFN_TEST_DEV_PROJECTS_RECONNECTS (default 2) sets how many forced reconnects each bridge
// goes through; five minutes of them is about 10 on this machine.
import assert from "node:assert/strict";
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { CoreV1Api, KubeConfig, KubernetesObjectApi, PatchStrategy, RbacAuthorizationV1Api, type KubernetesObject } from "@kubernetes/client-node";
import { packageRoot } from "../emulator/paths.ts";
import { eventually } from "./support/eventually.ts";

const main = join(packageRoot, "cli", "main.ts");
const RECONNECTS = Number(process.env.CRDFN_TEST_DEV_PROJECTS_RECONNECTS ?? 2);
const UNSERVED_NS = "devprojects-elsewhere";

/** A crdfn command in its own process group, run in `cwd`, its output collected. */
class Crdfn {
  readonly child: ChildProcess;
  output = "";
  readonly exited: Promise<number | null>;
  constructor(args: string[], cwd = packageRoot) {
    this.child = spawn(process.execPath, ["--conditions=crdfn-source", main, ...args], {
      cwd,
      detached: true,
      env: process.env,
      stdio: ["ignore", "pipe", "pipe"],
    });
    this.child.stdout!.on("data", (c: Buffer) => (this.output += c.toString()));
    this.child.stderr!.on("data", (c: Buffer) => (this.output += c.toString()));
    this.exited = new Promise((resolve) => this.child.once("exit", (code) => resolve(code)));
  }
  async waitFor(pattern: RegExp, timeoutMs = 120_000): Promise<void> {
    await eventually(() => assert.match(this.output, pattern, this.output.slice(-3000)), { timeoutMs, intervalMs: 200 });
  }
  count(pattern: RegExp): number {
    return this.output.split("\n").filter((l) => pattern.test(l)).length;
  }
  async interrupt(): Promise<number | null> {
    if (this.child.exitCode === null && this.child.signalCode === null) process.kill(-this.child.pid!, "SIGINT");
    return this.exited;
  }
  kill(): void {
    if (this.child.exitCode === null && this.child.signalCode === null) process.kill(-this.child.pid!, "SIGKILL");
  }
}

function processes(pattern: string): string[] {
  const r = spawnSync("pgrep", ["-af", pattern], { encoding: "utf8" });
  return r.status === 0
    ? r.stdout
        .trim()
        .split("\n")
        .filter((l) => l && !l.includes("pgrep"))
    : [];
}

/** One project's operator: its own kind and group, a ConfigMap child saying the spec's size. */
function operatorSource(kind: string): string {
  const lower = kind.toLowerCase();
  return `import { z } from "zod";
import { defineOperator } from "crdfn";

export default defineOperator({
  resource: { group: "${lower}.devprojects.crdfn.test", version: "v1", plural: "${lower}s", kind: "${kind}" },
  spec: z.object({ size: z.number().int() }),
  owns: [{ group: "", version: "v1", kind: "ConfigMap" }],
  reconcile(o) {
    return {
      children: [{ apiVersion: "v1", kind: "ConfigMap", metadata: { name: o.metadata.name + "-${lower}" }, data: { size: String(o.spec.size) } }],
      status: { phase: "Done" },
    };
  },
});
`;
}

interface Project {
  name: string;
  kind: string;
  folder: string;
  dev?: Crdfn;
  /** When its dev was started (its first tokens were issued just after). */
  startedAt?: number;
}

describe("two projects in crdfn dev on one cluster", { timeout: 900_000 }, () => {
  let cluster: Crdfn;
  let clusterState: string;
  let kubeConfig: KubeConfig;
  let objects: KubernetesObjectApi;
  const projects: Project[] = [];
  const apply = (obj: KubernetesObject) => objects.patch(obj, undefined, undefined, "test", true, PatchStrategy.ServerSideApply);
  const object = (p: Project, name: string, size: number, namespace = "default") =>
    apply({ apiVersion: `${p.kind.toLowerCase()}.devprojects.crdfn.test/v1`, kind: p.kind, metadata: { name, namespace }, spec: { size } } as KubernetesObject);
  const childSize = async (p: Project, name: string): Promise<string | undefined> => {
    const cm = await kubeConfig
      .makeApiClient(CoreV1Api)
      .readNamespacedConfigMap({ name: `${name}-${p.kind.toLowerCase()}`, namespace: "default" })
      .catch(() => undefined);
    return cm?.data?.size;
  };
  const devOf = (p: Project) => {
    const d = new Crdfn(
      ["dev", "--kubeconfig", join(clusterState, "kubeconfig"), "--operator", join(p.folder, "operator.ts"), "--state-dir", join(p.folder, ".crdfn")],
      p.folder,
    );
    p.dev = d;
    p.startedAt = Date.now();
    return d;
  };
  const tokenDirs = (p: Project): string[] =>
    existsSync(join(p.folder, ".crdfn")) ? readdirSync(join(p.folder, ".crdfn")).filter((f) => f.startsWith("tokens-")) : [];
  const apiServerPids = (): number[] => {
    const apiPort = /server: https:\/\/127\.0\.0\.1:(\d+)/.exec(readFileSync(join(clusterState, "kubeconfig"), "utf8"))![1]!;
    return processes(`secure-port=${apiPort}`).map((l) => Number(l.split(" ")[0]));
  };
  /**
   * Kills the API server with kill -9; the cluster's supervisor starts it again (kill after kill
   * within a minute is its crash loop: it waits 1, 2, 4… s, at most a minute). Every watch ends.
   */
  const forceReconnect = async (): Promise<void> => {
    const [killed] = apiServerPids();
    assert.ok(killed, "kube-apiserver is running");
    process.kill(killed, "SIGKILL");
    await eventually(
      () =>
        assert.ok(
          apiServerPids().some((pid) => pid !== killed),
          "kube-apiserver started again",
        ),
      { timeoutMs: 120_000, intervalMs: 250 },
    );
    await eventually(async () => assert.ok((await kubeConfig.makeApiClient(CoreV1Api).readNamespace({ name: "default" })).metadata?.name), {
      timeoutMs: 90_000,
      intervalMs: 500,
    });
  };

  before(async () => {
    mkdirSync(join(packageRoot, ".crdfn"), { recursive: true });
    for (const [name, kind] of [
      ["alpha", "Alpha"],
      ["beta", "Beta"],
    ] as const) {
      // Inside the repository, so the module's `import … from "crdfn"` resolves as a user's would.
      const folder = mkdtempSync(join(packageRoot, ".crdfn", `dev-projects-${name}-`));
      writeFileSync(join(folder, "operator.ts"), operatorSource(kind));
      // What names the project: its deploy settings, as `crdfn generate` reads them.
      writeFileSync(join(folder, "crdfn.deploy.yaml"), `project: ${name}\nnamespaces: [default]\n`);
      projects.push({ name, kind, folder });
    }
    clusterState = mkdtempSync(join(tmpdir(), "crdfn-up-"));
    cluster = new Crdfn(["cluster", "up", "--state-dir", clusterState, "--no-controller-manager"]);
    await cluster.waitFor(/crdfn cluster ready/);
    kubeConfig = new KubeConfig();
    kubeConfig.loadFromFile(join(clusterState, "kubeconfig"));
    objects = KubernetesObjectApi.makeApiClient(kubeConfig);
  });
  after(async () => {
    for (const p of projects) p.dev?.kill();
    if (cluster?.child.exitCode === null) await cluster.interrupt();
    for (const dir of [clusterState, ...projects.map((p) => p.folder)]) if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("an object of Alpha's kind already in a namespace Alpha does not serve: an Event, a dev line and a crdfn status line", async () => {
    const [alpha] = projects as [Project, Project];
    // The kind installed and an object made before dev applies the served-namespaces policy.
    await apply({ apiVersion: "v1", kind: "Namespace", metadata: { name: UNSERVED_NS } });
    await apply({
      apiVersion: "apiextensions.k8s.io/v1",
      kind: "CustomResourceDefinition",
      metadata: { name: "alphas.alpha.devprojects.crdfn.test" },
      spec: {
        group: "alpha.devprojects.crdfn.test",
        scope: "Namespaced",
        names: { plural: "alphas", singular: "alpha", kind: "Alpha", listKind: "AlphaList" },
        versions: [
          {
            name: "v1",
            served: true,
            storage: true,
            schema: { openAPIV3Schema: { type: "object", properties: { spec: { type: "object", "x-kubernetes-preserve-unknown-fields": true } } } },
          },
        ],
      },
    } as KubernetesObject);
    await eventually(() => object(alpha, "stray", 1, UNSERVED_NS), { timeoutMs: 30_000, intervalMs: 500 });

    const d = devOf(alpha);
    await d.waitFor(/crdfn dev ready/);
    assert.match(d.output, /identities as deployed: crdfn-alpha and crdfn-bridge-alpha, serving default/);
    await d.waitFor(
      new RegExp(
        `^⚠ Alpha ${UNSERVED_NS}/stray not served: Alpha objects are reconciled only in namespace default; namespace ${UNSERVED_NS} is not served`,
        "m",
      ),
      30_000,
    );
    const events = await kubeConfig.makeApiClient(CoreV1Api).listNamespacedEvent({ namespace: UNSERVED_NS, fieldSelector: "reason=NamespaceNotServed" });
    assert.equal(events.items.length, 1, "one Event on the object");
    assert.equal(events.items[0]!.involvedObject.name, "stray");
    assert.equal(events.items[0]!.type, "Warning");
    assert.match(events.items[0]!.message ?? "", /reconciled only in namespace default/);

    const status = spawnSync(
      process.execPath,
      ["--conditions=crdfn-source", main, "status", "--state-dir", join(alpha.folder, ".crdfn"), "--operator", join(alpha.folder, "operator.ts")],
      { cwd: alpha.folder, encoding: "utf8" },
    );
    assert.equal(status.status, 0, status.stderr);
    assert.match(
      status.stdout,
      new RegExp(`Objects in namespaces not served.*\\n  Alpha ${UNSERVED_NS}/stray: Alpha objects are reconciled only in namespace default`),
    );
  });

  it("both keep reconciling new objects and spec changes through forced watch reconnects, each with its own bridge identity", async () => {
    const [alpha, beta] = projects as [Project, Project];
    if (!alpha.dev) await devOf(alpha).waitFor(/crdfn dev ready/);
    const b = devOf(beta);
    await b.waitFor(/crdfn dev ready/);
    assert.match(b.output, /identities as deployed: crdfn-beta and crdfn-bridge-beta, serving default/);
    // Each project's watch Role in the shared namespace, neither replaced by the other's.
    const rbac = kubeConfig.makeApiClient(RbacAuthorizationV1Api);
    for (const p of projects) {
      const role = await rbac.readNamespacedRole({ name: `crdfn-bridge-${p.name}`, namespace: "default" });
      assert.ok(
        role.rules?.some((r) => r.resources?.includes(`${p.name}s`)),
        `crdfn-bridge-${p.name} still grants ${p.name}s`,
      );
    }
    for (const p of projects) await object(p, "first", 1);
    for (const p of projects) await eventually(async () => assert.equal(await childSize(p, "first"), "1"), { timeoutMs: 60_000 });

    const watchFailures = (p: Project) => p.dev!.count(/list\/watch failed; retrying/);
    for (let round = 1; round <= RECONNECTS; round++) {
      const before = projects.map(watchFailures);
      await forceReconnect();
      // A new object and a spec change for each project, after its bridge's watches were cut.
      for (const p of projects) {
        await eventually(() => object(p, `new-${round}`, round), { timeoutMs: 60_000, intervalMs: 500 });
        await eventually(() => object(p, "first", 100 + round), { timeoutMs: 60_000, intervalMs: 500 });
      }
      for (const p of projects) {
        await eventually(async () => assert.equal(await childSize(p, `new-${round}`), String(round)), { timeoutMs: 90_000 });
        await eventually(async () => assert.equal(await childSize(p, "first"), String(100 + round)), { timeoutMs: 90_000 });
      }
      projects.forEach((p, i) => assert.ok(watchFailures(p) > before[i]!, `${p.name}'s bridge lost its watches in round ${round}`));
    }
    for (const p of projects) assert.doesNotMatch(p.dev!.output, /refused the bridge's credential|is not allowed to/, `${p.name}: no refusal`);
  });

  it("a bridge whose Role is replaced says its identity is not allowed, not that its credential was refused", async () => {
    const [alpha] = projects as [Project, Project];
    // As a second project applying a Role of the same name would: alpha's Role now grants betas.
    await kubeConfig.makeApiClient(RbacAuthorizationV1Api).replaceNamespacedRole({
      name: "crdfn-bridge-alpha",
      namespace: "default",
      body: {
        apiVersion: "rbac.authorization.k8s.io/v1",
        kind: "Role",
        metadata: { name: "crdfn-bridge-alpha", namespace: "default" },
        rules: [{ apiGroups: ["beta.devprojects.crdfn.test"], resources: ["betas"], verbs: ["get", "list", "watch"] }],
      },
    });
    await forceReconnect();
    await alpha.dev!.waitFor(
      /the bridge's identity system:serviceaccount:crdfn-system:crdfn-bridge-alpha is not allowed to (list|watch) alphas\.alpha\.devprojects\.crdfn\.test in namespace default \(403 Forbidden\): its credential .* was accepted, but its Role was changed or replaced/,
      90_000,
    );
    assert.doesNotMatch(alpha.dev!.output, /refused the bridge's credential/);
  });

  it("keeps its tokens in its state folder, owner-only and short-lived, and leaves none after kill -9", async () => {
    const [, beta] = projects as [Project, Project];
    const [dir] = tokenDirs(beta);
    assert.ok(dir, "a tokens-* folder in .crdfn");
    const path = join(beta.folder, ".crdfn", dir);
    assert.equal(statSync(path).mode & 0o777, 0o700);
    const tokens = readdirSync(path).filter((f) => f.endsWith(".token"));
    assert.deepEqual(tokens.sort(), ["crdfn-beta.token", "crdfn-bridge-beta.token"]);
    for (const t of tokens) {
      assert.equal(statSync(join(path, t)).mode & 0o777, 0o600, t);
      const claims = JSON.parse(Buffer.from(readFileSync(join(path, t), "utf8").split(".")[1]!, "base64url").toString()) as { exp: number; iat: number };
      assert.equal(claims.exp - claims.iat, 600, `${t} lives 600 s, the API server's minimum`);
      // A run longer than half a token's life (CRDFN_TEST_DEV_PROJECTS_RECONNECTS ≳ 10) has renewed it.
      if (Date.now() - beta.startedAt! > 330_000)
        assert.ok(
          claims.iat * 1000 > beta.startedAt! + 250_000,
          `${t} renewed (issued ${new Date(claims.iat * 1000).toISOString()}; dev said: ${
            beta
              .dev!.output.split("\n")
              .filter((l) => /renew/.test(l))
              .join(" | ") || "nothing about renewals"
          })`,
        );
    }
    // kill -9 of dev alone (not its group): nothing of its own runs to clean up; the reaper does.
    process.kill(beta.dev!.child.pid!, "SIGKILL");
    await beta.dev!.exited;
    await eventually(() => assert.deepEqual(tokenDirs(beta), [], "no token folder left"), { timeoutMs: 30_000 });
  });
});
