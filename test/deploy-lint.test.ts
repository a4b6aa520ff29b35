// What a user deploys, checked by the field's own tools: cfn-lint (with the serverless rules) on
// the CloudFormation `serverless package` writes, checkov on the Kubernetes manifests and the
// Terraform `crdfn generate` writes, for the examples (on Lambda and on Cloud Run functions) and
// for a project made by `crdfn init`. Every finding must be a check docs/deploy-checks.md accepts
// with its reason, and every check it accepts must still be found: the doc is the list.
import { execFile } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { stringify } from "yaml";
import { generate, writeGenerated } from "../cli/generate/generate.ts";
import { projectFiles, projectNames } from "../cli/generate/init-templates.ts";
import { deployLinters, type DeployLinters } from "../emulator/deploy-linters.ts";
import { packageRoot } from "../emulator/paths.ts";
import { makeProject, type Project } from "./support/projects.ts";
import { serverlessPackage } from "./support/serverless-package.ts";

const run = promisify(execFile);
const DOC = join(packageRoot, "docs", "deploy-checks.md");
const EXAMPLES = ["greeting", "crontab", "queue"];

interface Finding {
  tool: "cfn-lint" | "checkov";
  id: string;
  /** The file and the resource in it, for the failure message. */
  where: string;
  message: string;
}

/** The check ids of the "Accepted findings" table of docs/deploy-checks.md. */
function acceptedChecks(markdown: string): Set<string> {
  const section = markdown.split(/^## Accepted findings$/m)[1] ?? "";
  return new Set([...section.matchAll(/^\| `([A-Za-z0-9_]+)` \|/gm)].map((m) => m[1]!));
}

describe("the generated deploy files pass cfn-lint and checkov but for the findings docs/deploy-checks.md accepts", { timeout: 900_000 }, () => {
  let linters: DeployLinters;
  const accepted = acceptedChecks(readFileSync(DOC, "utf8"));
  const found = new Set<string>();
  /** The runs that got through: the stale-row check needs all of them. */
  let passedRuns = 0;
  const work = mkdtempSync(join(tmpdir(), "crdfn-deploy-lint-"));
  let project: Project | undefined;

  before(async () => {
    linters = await deployLinters({ env: process.env, log: (line) => console.log(`deploy-lint: ${line}`) });
    console.log(
      `deploy-lint: ${Object.entries(linters.versions)
        .map(([n, v]) => `${n} ${v}`)
        .join(", ")}`,
    );
  });
  after(() => {
    rmSync(work, { recursive: true, force: true });
    project?.remove();
  });

  /** Fails on every finding whose check the doc does not accept; remembers the checks found. */
  const assertAccepted = (what: string, findings: Finding[]) => {
    for (const f of findings) found.add(f.id);
    const unlisted = findings.filter((f) => !accepted.has(f.id)).map((f) => `${f.tool} ${f.id} ${f.where}: ${f.message}`);
    assert.deepEqual(unlisted, [], `${what}: findings not accepted in docs/deploy-checks.md`);
    console.log(`deploy-lint: ${what}: ${findings.length} findings, all accepted (${[...new Set(findings.map((f) => f.id))].sort().join(", ") || "none"})`);
  };

  const cfnLint = async (template: string): Promise<Finding[]> => {
    // Exit status is a bit mask of the levels found; the JSON says which.
    const { stdout } = await run(linters.cfnLint, ["-a", "cfn_lint_serverless.rules", "--format", "json", template], { maxBuffer: 16 * 1024 * 1024 }).catch(
      (e: { stdout?: string; stderr?: string; code?: number }) => {
        if (typeof e.stdout === "string" && e.stdout.trim().startsWith("[")) return { stdout: e.stdout };
        throw new Error(`cfn-lint failed (exit ${e.code}): ${e.stderr ?? ""}`);
      },
    );
    const results = JSON.parse(stdout) as Array<{ Rule: { Id: string }; Message: string; Location: { Path: unknown[] } }>;
    return results.map((r) => ({ tool: "cfn-lint", id: r.Rule.Id, where: r.Location.Path.slice(0, 2).join("/"), message: r.Message }));
  };

  /**
   * checkov on a copy of a generated folder: checkov skips folders whose name starts with a dot
   * (a project under .crdfn/), and its terraform_json parser stops at the `terraform` block
   * (docs/deploy-checks.md), which holds only version constraints.
   */
  const checkov = async (deployDir: string): Promise<Finding[]> => {
    const copy = mkdtempSync(join(work, "checkov-"));
    cpSync(deployDir, copy, { recursive: true });
    const tf = join(copy, "gcp", "main.tf.json");
    const terraform = readJson(tf);
    if (terraform) {
      delete terraform.terraform;
      writeFileSync(tf, JSON.stringify(terraform, null, 2));
    }
    const { stdout } = await run(
      linters.checkov,
      ["-d", copy, "--framework", "kubernetes", "terraform_json", "--skip-download", "--soft-fail", "--compact", "--quiet", "-o", "json"],
      {
        maxBuffer: 64 * 1024 * 1024,
        env: { ...process.env, BC_SKIP_MAPPING: "TRUE" },
      },
    );
    const reports = [JSON.parse(stdout) as CheckovReport | CheckovReport[]].flat();
    const frameworks = reports.map((r) => r.check_type).sort();
    assert.deepEqual(frameworks, terraform ? ["kubernetes", "terraform_json"] : ["kubernetes"], `checkov read ${deployDir}`);
    for (const r of reports) assert.equal(r.summary.parsing_errors, 0, `checkov parsed every ${r.check_type} file of ${deployDir}`);
    return reports.flatMap((r) =>
      r.results.failed_checks.map((c) => ({
        tool: "checkov" as const,
        id: c.check_id,
        where: `${c.file_path.replace(/^\//, "")} ${c.resource}`,
        message: c.check_name,
      })),
    );
  };

  it("the examples on Lambda: the CloudFormation of `serverless package` and the manifests in infra/generated", async () => {
    const out = join(work, "examples-sls");
    await serverlessPackage({ cwd: packageRoot, out, stage: "test", region: "us-east-1", timeoutMs: 280_000 });
    assertAccepted("examples' CloudFormation", await cfnLint(join(out, "cloudformation-template-update-stack.json")));
    assertAccepted("examples' Kubernetes manifests (infra/generated)", await checkov(join(packageRoot, "infra", "generated")));
    passedRuns++;
  });

  it("the examples on Cloud Run functions: the Terraform and the manifests of target cloudrun", async () => {
    const dir = mkdtempSync(join(work, "examples-gcp-"));
    writeFileSync(
      join(dir, "crdfn.deploy.yaml"),
      stringify({
        project: "examples",
        target: "cloudrun",
        operators: EXAMPLES.map((e) => ({ module: join(packageRoot, "examples", e, "operator.ts") })),
        out: "deploy",
        cluster: "production",
        namespaces: ["default", "demo"],
        bridge: { image: "europe-west1-docker.pkg.dev/crdfn-example/crdfn/bridge:0.1.0" },
        gcp: { project: "crdfn-example", region: "europe-west1", gkeCluster: "prod-gke" },
      }),
    );
    writeFileSync(join(dir, "package.json"), JSON.stringify({ name: "examples", type: "module", main: "http.ts" }));
    writeFileSync(join(dir, "http.ts"), "// registers each operator's function\n");
    writeGenerated(await generate([], { settings: "crdfn.deploy.yaml" }, dir));
    assertAccepted("examples' Terraform and GKE manifests", await checkov(join(dir, "deploy")));
    passedRuns++;
  });

  it("a project made by `crdfn init`, its placeholders filled in: CloudFormation, manifests, and on Cloud Run its Terraform", async () => {
    const files = Object.fromEntries(
      projectFiles(projectNames("motd"), {
        crdfn: "0.1.0",
        zod: "^4",
        typescript: "^6",
        typesNode: "^24",
        serverless: "3.40.0",
        serverlessEsbuild: "^1",
        functionsFramework: "^5",
      }),
    );
    // What crdfn cannot know, filled in where the scaffold leaves it blank.
    files["crdfn.deploy.yaml"] = files["crdfn.deploy.yaml"]!.replace(/^cluster:( +#)/m, "cluster: motd-prod$1")
      .replace(/^ {2}image:( +#)/m, "  image: registry.example.com/motd/crdfn-bridge:0.1.0$1")
      .replace(/^ {2}urlBase:( +#)/m, "  urlBase: https://sqs.eu-west-1.amazonaws.com/123456789012$1");
    // crdfn from this checkout instead of the registry: its sources (the crdfn-source condition)
    // and the esbuild plugin beside them rather than dist/.
    files["serverless.yml"] = files["serverless.yml"]!.replace(
      "plugins: ./node_modules/crdfn/dist/cli/esbuild-plugins.js",
      "plugins: ./node_modules/crdfn/cli/esbuild-plugins.ts\n    conditions: [crdfn-source]",
    );
    assert.match(files["serverless.yml"], /conditions: \[crdfn-source\]/, "the scaffold's esbuild plugin line");
    files["crdfn.cloudrun.yaml"] =
      `${files["crdfn.deploy.yaml"]}target: cloudrun\ngcp: { project: motd-example, region: europe-west1, gkeCluster: prod-gke }\n`.replace(
        /^out: deploy$/m,
        "out: deploy-gcp",
      );
    project = makeProject("lint-motd", files);
    mkdirSync(join(project.dir, "node_modules"));
    symlinkSync(packageRoot, join(project.dir, "node_modules", "crdfn"), "dir");
    await project.generate();
    await project.generate({ settings: "crdfn.cloudrun.yaml" });
    const out = join(project.dir, ".serverless");
    await serverlessPackage({ cwd: project.dir, out, stage: "prod", region: "eu-west-1", timeoutMs: 280_000 });
    assertAccepted("crdfn init project's CloudFormation", await cfnLint(join(out, "cloudformation-template-update-stack.json")));
    assertAccepted("crdfn init project's Kubernetes manifests", await checkov(join(project.dir, "deploy")));
    assertAccepted("crdfn init project's Terraform and GKE manifests", await checkov(join(project.dir, "deploy-gcp")));
    passedRuns++;
  });

  it("every finding docs/deploy-checks.md accepts is still found (the table lists nothing stale)", (t) => {
    if (passedRuns < 3) return t.skip("a run above failed: what it would have found is unknown");
    assert.ok(accepted.size > 0, "the doc's table of accepted findings");
    assert.deepEqual([...accepted].filter((id) => !found.has(id)).sort(), [], "accepted in docs/deploy-checks.md but no longer found: remove these rows");
  });
});

interface CheckovReport {
  check_type: string;
  summary: { parsing_errors: number };
  results: { failed_checks: Array<{ check_id: string; check_name: string; resource: string; file_path: string }> };
}

function readJson(file: string): Record<string, unknown> | undefined {
  try {
    return JSON.parse(readFileSync(file, "utf8")) as Record<string, unknown>;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw e;
  }
}
