// `crdfn dev --kubeconfig` against a cluster it did not start — `crdfn cluster up` in another
// process group stands in for kind — as a person runs both: reconcile, reload on --watch,
// Ctrl-C that leaves the cluster and everything in it, and a restart with a CRD whose stored
// versions the operator no longer declares.
import assert from "node:assert/strict";
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, before, describe, it } from "node:test";
import { CoreV1Api, KubeConfig, KubernetesObjectApi, PatchStrategy, type KubernetesObject } from "@kubernetes/client-node";
import { readEnvFile } from "../cli/environment.ts";
import { packageRoot } from "../emulator/paths.ts";
import { eventually } from "./support/eventually.ts";

const main = join(packageRoot, "cli", "main.ts");
const GROUP = "devloop.crdfn.test";
const CRD = `widgets.${GROUP}`;

/** A crdfn command in its own process group (Ctrl-C reaches it alone), its output collected. */
class Crdfn {
  readonly child: ChildProcess;
  output = "";
  readonly exited: Promise<number | null>;
  constructor(args: string[], env: NodeJS.ProcessEnv = process.env) {
    this.child = spawn(process.execPath, ["--conditions=crdfn-source", main, ...args], {
      cwd: packageRoot,
      detached: true,
      env,
      stdio: ["ignore", "pipe", "pipe"],
    });
    this.child.stdout!.on("data", (c: Buffer) => (this.output += c.toString()));
    this.child.stderr!.on("data", (c: Buffer) => (this.output += c.toString()));
    this.exited = new Promise((resolve) => this.child.once("exit", (code) => resolve(code)));
  }
  async waitFor(pattern: RegExp, timeoutMs = 120_000): Promise<void> {
    await eventually(() => assert.match(this.output, pattern, this.output.slice(-2000)), { timeoutMs, intervalMs: 200 });
  }
  async interrupt(): Promise<number | null> {
    process.kill(-this.child.pid!, "SIGINT");
    return this.exited;
  }
  kill(): void {
    if (this.child.exitCode === null && this.child.signalCode === null) process.kill(-this.child.pid!, "SIGKILL");
  }
}

/** A user's operator module reconciling `version`, importing the prefix it writes from a second file. */
function operatorSource(version: string, versions = ""): string {
  return `import { z } from "zod";
import { defineOperator } from "crdfn";
import { prefix } from "./prefix.ts";

export default defineOperator({
  resource: { group: "${GROUP}", version: "${version}", plural: "widgets", kind: "Widget"${versions ? `, versions: ${versions}` : ""} },
  spec: z.object({ size: z.number().int() }),
  owns: [{ group: "", version: "v1", kind: "ConfigMap" }],
  reconcile(w) {
    return {
      children: [{ apiVersion: "v1", kind: "ConfigMap", metadata: { name: w.metadata.name + "-widget" }, data: { message: prefix + ":" + w.spec.size } }],
      status: { phase: "Done" },
    };
  },
});
`;
}

describe("crdfn dev --kubeconfig against an existing cluster", { timeout: 420_000 }, () => {
  let cluster: Crdfn;
  let folder: string;
  let clusterState: string;
  let devState: string;
  let kubeConfig: KubeConfig;
  let objects: KubernetesObjectApi;
  const devs: Crdfn[] = [];
  const operatorFile = () => join(folder, "operator.ts");
  const dev = (...args: string[]) => {
    const d = new Crdfn(["dev", "--kubeconfig", join(clusterState, "kubeconfig"), "--operator", operatorFile(), "--state-dir", devState, ...args], {
      ...process.env,
      // Later runs use the cluster's own ElasticMQ, as a user with CRDFN_SQS_ENDPOINT would.
      ...(devs.length > 0 ? { CRDFN_SQS_ENDPOINT: readEnvFile(join(clusterState, "env")).AWS_ENDPOINT_URL_SQS } : {}),
    });
    devs.push(d);
    return d;
  };
  const apply = (obj: KubernetesObject) => objects.patch(obj, undefined, undefined, "test", true, PatchStrategy.ServerSideApply);
  const widget = (name: string, size: number, version = "v1") =>
    apply({ apiVersion: `${GROUP}/${version}`, kind: "Widget", metadata: { name, namespace: "default" }, spec: { size } } as KubernetesObject);
  const message = async (name: string) => {
    const cm = await kubeConfig.makeApiClient(CoreV1Api).readNamespacedConfigMap({ name: `${name}-widget`, namespace: "default" });
    return cm.data?.message;
  };
  type Crd = KubernetesObject & {
    spec: { versions: { name: string; served: boolean; storage: boolean; deprecated?: boolean }[] };
    status: { storedVersions: string[] };
  };
  const crd = () => objects.read<Crd>({ apiVersion: "apiextensions.k8s.io/v1", kind: "CustomResourceDefinition", metadata: { name: CRD } });
  const stillThere = async () => {
    // The cluster answers, and what crdfn dev did not create, and what it did, are all still there.
    await kubeConfig.makeApiClient(CoreV1Api).readNamespace({ name: "default" });
    assert.equal((await kubeConfig.makeApiClient(CoreV1Api).readNamespacedConfigMap({ name: "unrelated", namespace: "default" })).data?.keep, "me");
    assert.equal((await crd()).metadata?.name, CRD);
  };

  before(async () => {
    mkdirSync(join(packageRoot, ".crdfn"), { recursive: true });
    // Inside the repository, so the module's `import … from "crdfn"` resolves as a user's would.
    folder = mkdtempSync(join(packageRoot, ".crdfn", "dev-existing-"));
    writeFileSync(join(folder, "prefix.ts"), `export const prefix = "one";\n`);
    writeFileSync(operatorFile(), operatorSource("v1"));
    clusterState = mkdtempSync(join(tmpdir(), "crdfn-up-"));
    devState = mkdtempSync(join(tmpdir(), "crdfn-dev-existing-"));
    cluster = new Crdfn(["cluster", "up", "--state-dir", clusterState, "--no-controller-manager"]);
    await cluster.waitFor(/crdfn cluster ready/);
    kubeConfig = new KubeConfig();
    kubeConfig.loadFromFile(join(clusterState, "kubeconfig"));
    objects = KubernetesObjectApi.makeApiClient(kubeConfig);
    await apply({ apiVersion: "v1", kind: "ConfigMap", metadata: { name: "unrelated", namespace: "default" }, data: { keep: "me" } } as KubernetesObject);
  });
  after(async () => {
    for (const d of devs) d.kill();
    if (cluster?.child.exitCode === null) await cluster.interrupt();
    for (const dir of [folder, clusterState, devState]) if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("installs only the CRD, reconciles, and reloads the operator on --watch", async () => {
    const d = dev("--watch");
    // Printed a few lines after "ready", maybe in a later chunk of output: waited for, not read at once.
    await d.waitFor(/crdfn dev ready[^]*Ctrl-C stops crdfn dev; the cluster and its objects stay/);
    assert.equal((await crd()).spec.versions.length, 1);
    await widget("a", 1);
    await eventually(async () => assert.equal(await message("a"), "one:1"));
    await d.waitFor(/✔ Widget a reconciled/, 10_000);

    // A file the operator imports changes: the next reconcile runs the new code, nothing restarts.
    writeFileSync(join(folder, "prefix.ts"), `export const prefix = "two";\n`);
    await d.waitFor(/↻ Widget reloaded from .*operator\.ts.*; 1 object\(s\) reconciled again/, 20_000);
    // The existing object meets the new code at once (the bridge re-announces it), not at its next change.
    await eventually(async () => assert.equal(await message("a"), "two:1"));
    await widget("b", 2);
    await eventually(async () => assert.equal(await message("b"), "two:2"));

    // A syntax error: one line, and the previous version keeps reconciling.
    writeFileSync(operatorFile(), `${operatorSource("v1")}\nexport const broken = ;\n`);
    await d.waitFor(/✖ .*operator\.ts not reloaded, the previous version keeps running: /, 20_000);
    const line = d.output.split("\n").find((l) => l.startsWith("✖"))!;
    assert.doesNotMatch(line, /\n|    at /);
    await widget("c", 3);
    await eventually(async () => assert.equal(await message("c"), "two:3"));
    writeFileSync(operatorFile(), operatorSource("v1"));
    await d.waitFor(/↻ Widget reloaded[^\n]*\n(.|\n)*↻ Widget reloaded/, 20_000);
    assert.equal(d.output.match(/crdfn dev ready/g)?.length, 1, "started once");

    assert.equal(await d.interrupt(), 0);
    assert.match(d.output, /stopped/);
    await stillThere();
    assert.equal(await message("a"), "two:1", "children stay too");
  });

  it("restarts with a second, stored version, then without the first: the CRD keeps it", async () => {
    writeFileSync(
      operatorFile(),
      operatorSource("v2", `[{ name: "v1", deprecated: true, deprecationWarning: "${GROUP}/v1 Widget is deprecated; use v2" }, { name: "v2", storage: true }]`),
    );
    const two = dev();
    await two.waitFor(/crdfn dev ready/);
    const both = await crd();
    assert.deepEqual(
      both.spec.versions.map(({ name, served, storage, deprecated }) => ({ name, served, storage, deprecated })),
      [
        { name: "v1", served: true, storage: false, deprecated: true },
        { name: "v2", served: true, storage: true, deprecated: undefined },
      ],
    );
    assert.deepEqual(both.status.storedVersions, ["v1", "v2"]);
    await widget("d", 4, "v2");
    await eventually(async () => assert.equal(await message("d"), "two:4"));
    assert.equal(await two.interrupt(), 0);

    // v1 is no longer declared, but objects may be stored as v1: re-applying keeps it, unserved.
    writeFileSync(operatorFile(), operatorSource("v2"));
    const three = dev();
    await three.waitFor(/crdfn dev ready/);
    assert.match(three.output, new RegExp(`CRD ${CRD} keeps v1 .*unserved`));
    const kept = await crd();
    assert.deepEqual(
      kept.spec.versions.map(({ name, served, storage }) => ({ name, served, storage })),
      [
        { name: "v2", served: true, storage: true },
        { name: "v1", served: false, storage: false },
      ],
    );
    await widget("a", 5, "v2");
    await eventually(async () => assert.equal(await message("a"), "two:5"), { timeoutMs: 30_000 });
    assert.equal(await three.interrupt(), 0);
    await stillThere();
  });

  it("--kind without kind or Docker says so in one line and points at --kubeconfig", () => {
    const r = spawnSync(process.execPath, ["--conditions=crdfn-source", main, "dev", "--kind", "--state-dir", devState], {
      cwd: packageRoot,
      // Neither kind nor docker on this PATH, whatever the machine has.
      env: { ...process.env, PATH: dirname(process.execPath) },
      encoding: "utf8",
    });
    assert.equal(r.status, 2);
    assert.equal(r.stderr.trim().split("\n").length, 1, r.stderr);
    assert.match(r.stderr, /^crdfn: --kind: kind is not installed; run crdfn dev --kubeconfig <file>/);
  });
});
