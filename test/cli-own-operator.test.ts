// A user's own project, as the README shows it: the files its "Your own project" section prints
// are the ones `crdfn init motd` writes (one truth: cli/generate/init-templates.ts), and the operator
// must work in the emulator like the shipped examples, its unit test type-checking strictly.
import assert from "node:assert/strict";
import { execFile, execFileSync } from "node:child_process";
import { promisify } from "node:util";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { after, before, describe, it } from "node:test";
import { KubernetesObjectApi, PatchStrategy, loadYaml, type KubernetesObject } from "@kubernetes/client-node";
import { pino } from "pino";
import { projectFiles, projectNames } from "../cli/generate/init-templates.ts";
import { loadOperator } from "../cli/operators.ts";
import { startPipeline, type Pipeline, type ReconcileRecord } from "../cli/local/pipeline.ts";
import { testCluster, type TestCluster } from "./support/test-cluster.ts";
import { packageRoot } from "../emulator/paths.ts";
import { eventually } from "./support/eventually.ts";

const run = promisify(execFile);

type Motd = KubernetesObject & {
  status?: { lines?: number; observedGeneration?: number; conditions?: { type: string; status: string; reason: string }[] };
};

/** Fenced blocks written as ```lang file=path in the README section. */
function readmeFiles(section: string): Map<string, string> {
  const readme = readFileSync(join(packageRoot, "README.md"), "utf8");
  const start = readme.indexOf(`## ${section}`);
  assert.ok(start >= 0, `README has no "${section}" section`);
  const end = readme.indexOf("\n## ", start + 3);
  const text = readme.slice(start, end < 0 ? undefined : end);
  const files = new Map<string, string>();
  for (const m of text.matchAll(/```\w+ file=(\S+)\n([\s\S]*?)```/g)) files.set(m[1]!, m[2]!);
  return files;
}

describe("an operator written from the README", { timeout: 180_000 }, () => {
  let cluster: TestCluster;
  let pipeline: Pipeline;
  let folder: string;
  const records: ReconcileRecord[] = [];
  const files = readmeFiles("Your own project");

  before(async () => {
    // Inside the repository without a package.json of its own, so `import … from "crdfn"`
    // resolves to this checkout (test/package-install.test.ts covers an installed crdfn).
    mkdirSync(join(packageRoot, ".crdfn"), { recursive: true });
    folder = mkdtempSync(join(packageRoot, ".crdfn", "readme-operator-"));
    for (const [path, content] of files) {
      mkdirSync(dirname(join(folder, path)), { recursive: true });
      writeFileSync(join(folder, path), content);
    }
    // The README's sample lives in "default"; on a shared control plane no other file uses Motds.
    cluster = await testCluster({ file: import.meta.filename });
    const operator = await loadOperator(join(folder, "operator.ts"));
    pipeline = await startPipeline({
      cluster,
      queue: cluster.sqs,
      operators: [operator],
      logger: pino({ level: "warn" }),
      onReconcile: (r) => records.push(r),
    });
  });
  after(async () => {
    await pipeline?.stop();
    await cluster?.stop();
    rmSync(folder, { recursive: true, force: true });
  });

  it("prints the operator, its sample and its unit test exactly as `crdfn init motd` writes them", () => {
    assert.deepEqual([...files.keys()].sort(), ["operator.test.ts", "operator.ts", "sample.yaml"]);
    const made = projectFiles(projectNames("motd"), {
      crdfn: "^0.0.0",
      zod: "^4.0.0",
      typescript: "^6.0.0",
      typesNode: "^22.18.0",
      serverless: "3.40.0",
      serverlessEsbuild: "^1.0.0",
      functionsFramework: "^5.0.0",
    });
    for (const [path, text] of files) assert.equal(text, made.get(path), `README's ${path} differs from crdfn init's`);
  });

  it("type-checks under the project's strict settings", () => {
    writeFileSync(join(folder, "tsconfig.json"), JSON.stringify({ extends: "../../tsconfig.json", include: ["*.ts"] }));
    execFileSync(join(packageRoot, "node_modules", ".bin", "tsc"), ["--noEmit", "-p", folder], { encoding: "utf8" });
  });

  it("passes its own unit test", () => {
    // Without NODE_TEST_CONTEXT, which would make that run report to this test runner instead.
    const { NODE_TEST_CONTEXT: _, ...env } = process.env;
    const out = execFileSync(process.execPath, ["--conditions=crdfn-source", "--test", "operator.test.ts"], { cwd: folder, env, encoding: "utf8" });
    assert.match(out, /[#ℹ] pass 2\n[#ℹ] fail 0\n/);
  });

  it("reconciles the sample into its ConfigMap and a Ready status", async () => {
    const api = KubernetesObjectApi.makeApiClient(cluster.kubeConfig);
    const sample = loadYaml<KubernetesObject>(files.get("sample.yaml")!);
    await api.patch(sample, undefined, undefined, "readme-test", true, PatchStrategy.ServerSideApply);
    const cm = await eventually(() => api.read({ apiVersion: "v1", kind: "ConfigMap", metadata: { name: "welcome-motd", namespace: "default" } }));
    assert.equal((cm as { data?: Record<string, string> }).data?.text, "Welcome to the cluster.\nBackups run at 02:00 UTC.");
    assert.equal(cm.metadata?.labels?.audience, "everyone", "the zod default reached reconcile");
    assert.equal(cm.metadata?.ownerReferences?.[0]?.kind, "Motd");
    await eventually(async () => {
      const motd: Motd = await api.read(sample as { metadata: { name: string; namespace: string } });
      assert.equal(motd.status?.lines, 2);
      assert.equal(motd.status?.observedGeneration, motd.metadata?.generation);
      assert.equal(motd.status?.conditions?.find((c) => c.type === "Ready")?.status, "True");
    });
    // The status is written inside the reconcile; its record is reported once the handler returns.
    await eventually(() => assert.ok(records.some((r) => r.kind === "Motd" && r.name === "welcome" && r.outcome.result === "success")));
  });

  it("`crdfn status` in the project, no --operator, shows its objects: the operators crdfn.deploy.yaml lists", async () => {
    // The project as crdfn init writes it: its settings list operator.ts and leave what crdfn cannot know empty.
    const made = projectFiles(projectNames("motd"), {
      crdfn: "^0.0.0",
      zod: "^4.0.0",
      typescript: "^6.0.0",
      typesNode: "^22.18.0",
      serverless: "3.40.0",
      serverlessEsbuild: "^1.0.0",
      functionsFramework: "^5.0.0",
    });
    writeFileSync(join(folder, "crdfn.deploy.yaml"), made.get("crdfn.deploy.yaml")!);
    const { NODE_TEST_CONTEXT: _, ...env } = process.env;
    const { stdout, stderr } = await run(process.execPath, [join(packageRoot, "cli", "main.ts"), "status"], {
      cwd: folder,
      env: { ...env, ...cluster.env },
      encoding: "utf8",
    });
    assert.match(stderr, /operators from \.\/crdfn\.deploy\.yaml/);
    assert.match(stdout, /^\s+Motd default\/welcome\s+True\s+/m, stdout);
  });

  it("`crdfn resync motds welcome` reconciles it once more", async () => {
    const before = records.filter((r) => r.name === "welcome").length;
    const out = execFileSync(process.execPath, [join(packageRoot, "cli", "main.ts"), "resync", "motds", "welcome", "--kubeconfig", cluster.kubeconfigPath], {
      encoding: "utf8",
    });
    assert.match(out, /resync requested for 1 object\(s\): default\/welcome/);
    await eventually(() => assert.ok(records.filter((r) => r.name === "welcome").length > before, "reconciled again"));
  });

  it("turns its PermanentError into Ready=False with the operator's reason", async () => {
    const api = KubernetesObjectApi.makeApiClient(cluster.kubeConfig);
    const bad = { apiVersion: "demo.example.com/v1", kind: "Motd", metadata: { name: "tabs", namespace: "default" }, spec: { lines: ["a\tb"] } };
    await api.create(bad);
    await eventually(async () => {
      const motd: Motd = await api.read(bad);
      const ready = motd.status?.conditions?.find((c) => c.type === "Ready");
      assert.equal(ready?.status, "False");
      assert.equal(ready?.reason, "TabsInLines");
    });
  });
});
