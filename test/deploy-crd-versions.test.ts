// A CRD version objects are stored as, dropped by the operator: the CRD `crdfn generate` and
// `crdfn crd` write must still list it, or a real API server refuses it. Read from the cluster
// (--kubeconfig) or declared retired by the operator, it is kept unserved and the CRD applies;
// with neither, generate refuses in one line instead of writing a CRD the cluster would refuse.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { after, before, describe, it } from "node:test";
import { parse, stringify } from "yaml";
import { crdOf } from "../deploy/crd.ts";
import { loadOperator } from "../cli/operators.ts";
import { SetupError } from "../emulator/errors.ts";
import { testCluster, type TestCluster } from "./support/test-cluster.ts";
import { packageRoot } from "../emulator/paths.ts";
import { adminKubectl, type Kubectl } from "./support/identities.ts";
import { deploySettings, lambdaEntry, makeProject, type Project } from "./support/projects.ts";

const run = promisify(execFile);
const CRD = "gizmos.versions.example.com";
const operator = (version: string, versions = "") => `import { z } from "zod";
import { defineOperator } from "crdfn";

export default defineOperator({
  resource: { group: "versions.example.com", version: "${version}", ${versions}plural: "gizmos", kind: "Gizmo" },
  spec: z.object({ size: z.number() }),
  reconcile: () => ({}),
});
`;
type Crd = { spec: { versions: Array<{ name: string; served: boolean; storage: boolean }> }; status?: { storedVersions?: string[] } };
const versionsOf = (crd: Crd) => crd.spec.versions.map(({ name, served, storage }) => ({ name, served, storage }));

describe("CRD versions the cluster still stores", { timeout: 240_000 }, () => {
  let cluster: TestCluster;
  let admin: Kubectl;
  let project: Project;
  const crdFile = () => join(project.dir, "deploy", "crds", `${CRD}.yaml`);
  const applyCrd = (file: string) => admin(["apply", "--server-side", "--field-manager=crdfn-test", "-f", file]);

  before(async () => {
    project = makeProject("versions", {
      "crdfn.deploy.yaml": deploySettings("versions", { operators: [{ module: "operator.ts" }] }),
      "operator.ts": operator("v1beta1"),
      "lambda.ts": lambdaEntry(),
    });
    cluster = await testCluster({ file: import.meta.filename });
    admin = adminKubectl(cluster);
  });
  after(async () => {
    await cluster?.stop();
    project?.remove();
  });

  it("stores an object as v1beta1 under the CRD generated first", async () => {
    await project.generate();
    await applyCrd(crdFile());
    await admin(["wait", "--for=condition=Established", "--timeout=60s", `crd/${CRD}`]);
    await admin(
      ["apply", "--server-side", "-f", "-"],
      JSON.stringify({ apiVersion: "versions.example.com/v1beta1", kind: "Gizmo", metadata: { name: "old", namespace: "default" }, spec: { size: 1 } }),
    );
    const crd = JSON.parse(await admin(["get", "crd", CRD, "-o", "json"])) as Crd;
    assert.deepEqual(crd.status?.storedVersions, ["v1beta1"]);
  });

  it("a CRD without the stored version is what the API server refuses", async () => {
    project.write({ "operator.ts": operator("v1") });
    const dropped = stringify(crdOf(await loadOperator(join(project.dir, "operator.ts"))));
    await assert.rejects(
      admin(["apply", "--server-side", "--dry-run=server", "--field-manager=crdfn-test", "-f", "-"], dropped),
      /status\.storedVersions\[0\]: Invalid value: "v1beta1": missing from spec\.versions/,
    );
  });

  it("without the cluster, generate refuses in one line to drop the version the CRD it wrote before stores", async () => {
    await assert.rejects(
      project.generate(),
      (e: Error) =>
        e instanceof SetupError &&
        !e.message.includes("\n") &&
        e.message ===
          `deploy/crds/${CRD}.yaml has v1beta1, which Gizmo no longer declares: objects may still be stored as it and the API server refuses a CRD without it; declare { name: "v1beta1", served: false } in resource.versions (retired), or pass --kubeconfig to keep what the cluster stores`,
    );
  });

  it("with --kubeconfig, generate keeps v1beta1 unserved, says so, and the CRD applies", async () => {
    const g = await project.generate({ kubeconfig: cluster.kubeconfigPath });
    assert.deepEqual(g.notes, [
      `CRD ${CRD} keeps v1beta1, unserved: the cluster still stores objects as it (declare { name: "v1beta1", served: false } in resource.versions to generate the same without the cluster)`,
    ]);
    const written = parse((g.files.get(`crds/${CRD}.yaml`) ?? "").replace(/^#.*\n/, "")) as Crd;
    assert.deepEqual(versionsOf(written), [
      { name: "v1", served: true, storage: true },
      { name: "v1beta1", served: false, storage: false },
    ]);
    await applyCrd(crdFile());
    const applied = JSON.parse(await admin(["get", "crd", CRD, "-o", "json"])) as Crd;
    assert.deepEqual(versionsOf(applied), versionsOf(written));
    assert.deepEqual(applied.status?.storedVersions, ["v1beta1", "v1"]);
    // The object stored as v1beta1 is served as v1.
    assert.equal(
      (JSON.parse(await admin(["get", "gizmos.v1.versions.example.com", "old", "-n", "default", "-o", "json"])) as { apiVersion: string }).apiVersion,
      "versions.example.com/v1",
    );
  });

  it("crdfn crd --kubeconfig prints the same CRD, with one note line", async () => {
    const out = await run(
      process.execPath,
      ["--conditions=crdfn-source", join(packageRoot, "cli", "main.ts"), "crd", "operator.ts", "--kubeconfig", cluster.kubeconfigPath],
      { cwd: project.dir },
    );
    assert.deepEqual(versionsOf(parse(out.stdout) as Crd), [
      { name: "v1", served: true, storage: true },
      { name: "v1beta1", served: false, storage: false },
    ]);
    assert.match(out.stderr, new RegExp(`^crdfn: CRD ${CRD.replace(/\./g, "\\.")} keeps v1beta1, unserved: .*\\n$`));
  });

  it("declared retired by the operator, v1beta1 is kept without the cluster, and the CRD applies", async () => {
    project.write({ "operator.ts": operator("v1", `versions: [{ name: "v1beta1", served: false }, { name: "v1" }], `) });
    const g = await project.generate();
    assert.deepEqual(g.notes, []);
    await applyCrd(crdFile());
    const applied = JSON.parse(await admin(["get", "crd", CRD, "-o", "json"])) as Crd;
    assert.deepEqual(versionsOf(applied), [
      { name: "v1beta1", served: false, storage: false },
      { name: "v1", served: true, storage: true },
    ]);
  });
});
