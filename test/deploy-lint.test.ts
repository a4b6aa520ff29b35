// What a user deploys, checked by the field's own tools: cfn-lint (with the serverless rules) on
// the CloudFormation `serverless package` writes, checkov on the Kubernetes manifests and the
// Terraform `crdfn generate` writes, for the examples (on Lambda and on Cloud Run functions) and
// for a project made by `crdfn init`; checkov also on that CloudFormation. Every finding must be a
// check docs/deploy-checks.md accepts on its resource, with its reason, and every row it accepts
// must still be found: the doc is the list. A checkov run that checked nothing in a file it should
// read (a file its parser gave up on reads as 0 checks, exit 0) fails.
import { execFile } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { promisify } from "node:util";
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { parseAllDocuments, stringify } from "yaml";
import { generate, writeGenerated, type Generated } from "../cli/generate/generate.ts";
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
  /**
   * What the doc's patterns match: CloudFormation `<Type>.<logical id>` (as checkov names it),
   * Kubernetes `<Kind>.<namespace>.<name>`, Terraform `<type>.<name>`.
   */
  resource: string;
  /** The file, for the failure message. */
  file: string;
  message: string;
}

/** A row of the "Accepted findings" table: a check id and the resources (globs, `*` any text) it is accepted on. */
interface AcceptedRow {
  id: string;
  patterns: string[];
}

/** The rows of the "Accepted findings" table of docs/deploy-checks.md; each code span in "where" is a resource pattern. */
function acceptedRows(markdown: string): AcceptedRow[] {
  const section = markdown.split(/^## Accepted findings$/m)[1] ?? "";
  return [...section.matchAll(/^\| `([A-Za-z0-9_]+)` \|[^|]*\|([^|]*)\|/gm)].map((m) => ({
    id: m[1]!,
    patterns: [...m[2]!.matchAll(/`([^`]+)`/g)].map((p) => p[1]!),
  }));
}

const escapeRegExp = (text: string): string => text.replace(/[.+?^$()|[\]\\{}]/g, "\\$&");
const globMatches = (pattern: string, resource: string): boolean => new RegExp(`^${pattern.split("*").map(escapeRegExp).join(".*")}$`).test(resource);

/**
 * Kinds checkov 3.3.30 has no check for: a file of only these is read (resource_count) but gets
 * 0 checks. Every other file it reads must get at least one.
 */
const KINDS_CHECKOV_DOES_NOT_CHECK = new Set([
  "Namespace",
  "CustomResourceDefinition",
  "ValidatingAdmissionPolicy",
  "ValidatingAdmissionPolicyBinding",
  "Kustomization",
]);

/** The files of a checkov folder it must have checked, relative to that folder with a leading slash (its file_path). */
function filesCheckovMustCheck(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: "utf8" })
    .filter((f) => {
      if (f.endsWith(".json")) return true;
      if (!f.endsWith(".yaml")) return false;
      const kinds = parseAllDocuments(readFileSync(join(dir, f), "utf8")).map((d) => (d.toJS() as { kind?: string } | null)?.kind ?? "");
      return kinds.some((k) => !KINDS_CHECKOV_DOES_NOT_CHECK.has(k));
    })
    .map((f) => `/${f}`)
    .sort();
}

/**
 * Terraform addresses by the line of their name in JSON written with 2-space indents: checkov's
 * terraform_json results name a resource `resource.<name>`, without its type, but give its lines.
 */
function terraformAddresses(text: string): Map<number, string> {
  const addresses = new Map<number, string>();
  let block: string | undefined;
  let type: string | undefined;
  text.split("\n").forEach((line, i) => {
    const m = /^( *)"([^"]+)": \{/.exec(line);
    if (!m) return;
    const depth = m[1]!.length / 2;
    if (depth === 1) [block, type] = [m[2], undefined];
    else if (depth === 2) type = m[2];
    else if (depth === 3 && type && (block === "resource" || block === "data")) addresses.set(i + 1, `${block === "data" ? "data." : ""}${type}.${m[2]}`);
  });
  return addresses;
}

describe("the generated deploy files pass cfn-lint and checkov but for the findings docs/deploy-checks.md accepts", { timeout: 900_000 }, () => {
  let linters: DeployLinters;
  const rows = acceptedRows(readFileSync(DOC, "utf8"));
  /** Each row's patterns that some finding matched, by `<id> <pattern>`. */
  const matched = new Set<string>();
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

  it("the doc's table names, for every accepted check, the resources it is accepted on", () => {
    assert.ok(rows.length > 0, "the doc's table of accepted findings");
    assert.deepEqual(
      rows.filter((r) => r.patterns.length === 0).map((r) => r.id),
      [],
      'rows whose "where" names no resource (a code span: a logical id, <Kind>.<namespace>.<name> or a Terraform address; `*` for any text)',
    );
  });

  /** Fails on every finding no row of the doc accepts, by check id and resource; remembers what each row matched. */
  const assertAccepted = (what: string, findings: Finding[]) => {
    const unlisted: string[] = [];
    for (const f of findings) {
      const hits = rows.flatMap((r) => (r.id === f.id ? r.patterns.filter((p) => globMatches(p, f.resource)).map((p) => `${r.id} ${p}`) : []));
      for (const h of hits) matched.add(h);
      if (hits.length === 0) unlisted.push(`${f.tool} ${f.id} ${f.resource} (${f.file}): ${f.message}`);
    }
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
    const resources = (readJson(template)?.Resources ?? {}) as Record<string, { Type: string }>;
    const results = JSON.parse(stdout) as Array<{ Rule: { Id: string }; Message: string; Location: { Path: unknown[] } }>;
    return results.map((r) => {
      const [section, id] = r.Location.Path.map(String);
      const resource = section === "Resources" && id && resources[id] ? `${resources[id].Type}.${id}` : r.Location.Path.slice(0, 2).join("/");
      return { tool: "cfn-lint", id: r.Rule.Id, resource, file: template, message: r.Message };
    });
  };

  /**
   * checkov on a copy of what `files` names (a generated folder, or one template): checkov skips
   * folders whose name starts with a dot (a project under .crdfn/), and its terraform_json parser
   * cannot read `terraform.required_version` (docs/deploy-checks.md). Asserts it parsed every
   * file and ran checks on every file it has checks for; logs its counts per file.
   */
  const checkov = async (what: string, source: string, frameworks: string[]): Promise<Finding[]> => {
    const copy = mkdtempSync(join(work, "checkov-"));
    if (source.endsWith(".json")) cpSync(source, join(copy, basename(source)));
    else cpSync(source, copy, { recursive: true });
    const tf = join(copy, "gcp", "main.tf.json");
    const terraform = readJson(tf) as { terraform?: { required_version?: string } } | undefined;
    let addresses = new Map<number, string>();
    if (terraform) {
      assert.ok(terraform.terraform?.required_version, "main.tf.json's terraform.required_version");
      delete terraform.terraform.required_version;
      const text = JSON.stringify(terraform, null, 2);
      writeFileSync(tf, text);
      addresses = terraformAddresses(text);
    }
    const { stdout } = await run(linters.checkov, ["-d", copy, "--framework", ...frameworks, "--skip-download", "--soft-fail", "--compact", "-o", "json"], {
      maxBuffer: 64 * 1024 * 1024,
      env: { ...process.env, BC_SKIP_MAPPING: "TRUE" },
    });
    const reports = [JSON.parse(stdout) as CheckovReport | CheckovReport[]].flat();
    assert.deepEqual(reports.map((r) => r.check_type).sort(), [...frameworks].sort(), `checkov read ${source} with each framework`);
    const counts = new Map<string, { passed: number; failed: number; skipped: number }>();
    for (const r of reports) {
      assert.equal(r.summary.parsing_errors, 0, `checkov parsed every ${r.check_type} file of ${source}`);
      for (const [outcome, checks] of [
        ["passed", r.results.passed_checks],
        ["failed", r.results.failed_checks],
        ["skipped", r.results.skipped_checks],
      ] as const) {
        for (const c of checks ?? []) {
          const count = counts.get(c.file_path) ?? { passed: 0, failed: 0, skipped: 0 };
          count[outcome]++;
          counts.set(c.file_path, count);
        }
      }
    }
    for (const [file, c] of [...counts].sort())
      console.log(`deploy-lint: checkov ${what}: ${file}: ${c.passed} passed, ${c.failed} failed, ${c.skipped} skipped`);
    const unchecked = filesCheckovMustCheck(copy).filter((f) => !counts.has(f));
    assert.deepEqual(unchecked, [], `${what}: files checkov ran no check on`);
    return reports.flatMap((r) =>
      r.results.failed_checks.map((c) => ({
        tool: "checkov" as const,
        id: c.check_id,
        resource: (r.check_type === "terraform_json" && addresses.get(c.file_line_range[0])) || c.resource,
        file: c.file_path,
        message: c.check_name,
      })),
    );
  };

  /** Both tools on the CloudFormation `serverless package` wrote into `out`. */
  const lintCloudFormation = async (what: string, out: string) => {
    const template = join(out, "cloudformation-template-update-stack.json");
    assertAccepted(`${what} (cfn-lint)`, await cfnLint(template));
    assertAccepted(`${what} (checkov)`, await checkov(what, template, ["cloudformation"]));
  };

  it("the examples on Lambda: the CloudFormation of `serverless package` and the manifests in infra/generated", async () => {
    const out = join(work, "examples-sls");
    await serverlessPackage({ cwd: packageRoot, out, stage: "test", region: "us-east-1", timeoutMs: 280_000 });
    await lintCloudFormation("examples' CloudFormation", out);
    assertAccepted(
      "examples' Kubernetes manifests (infra/generated)",
      await checkov("infra/generated", join(packageRoot, "infra", "generated"), ["kubernetes"]),
    );
    passedRuns++;
  });

  it("the examples on Cloud Run functions: the Terraform and the manifests of target cloudrun", async () => {
    const { dir } = await examplesOnCloudRun(mkdtempSync(join(work, "examples-gcp-")));
    assertAccepted("examples' Terraform and GKE manifests", await checkov("examples on cloudrun", join(dir, "deploy"), ["kubernetes", "terraform_json"]));
    passedRuns++;
  });

  it("docs/deploy-checks.md names every provider `terraform init` installs: the generated required_providers", async () => {
    const { generated } = await examplesOnCloudRun(mkdtempSync(join(work, "examples-gcp-providers-")));
    const tf = JSON.parse(generated.files.get("gcp/main.tf.json") ?? "{}") as { terraform: { required_providers: Record<string, { source: string }> } };
    const bullet = /^- `terraform validate` is not run:.*?(?=^\S|^- )/ms.exec(readFileSync(DOC, "utf8"))?.[0] ?? "";
    const named = [...bullet.matchAll(/`(hashicorp\/[a-z0-9-]+)`/g)].map((m) => m[1]);
    assert.deepEqual(
      named.sort(),
      Object.values(tf.terraform.required_providers)
        .map((p) => p.source)
        .sort(),
    );
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
    await lintCloudFormation("crdfn init project's CloudFormation", out);
    assertAccepted("crdfn init project's Kubernetes manifests", await checkov("crdfn init project", join(project.dir, "deploy"), ["kubernetes"]));
    assertAccepted(
      "crdfn init project's Terraform and GKE manifests",
      await checkov("crdfn init project on cloudrun", join(project.dir, "deploy-gcp"), ["kubernetes", "terraform_json"]),
    );
    passedRuns++;
  });

  it("every finding docs/deploy-checks.md accepts is still found, on every resource its row names (the table lists nothing stale)", (t) => {
    if (passedRuns < 3) return t.skip("a run above failed: what it would have found is unknown");
    const stale = rows.flatMap((r) => r.patterns.map((p) => `${r.id} ${p}`)).filter((row) => !matched.has(row));
    assert.deepEqual(stale, [], "accepted in docs/deploy-checks.md but no longer found there: remove these rows or resources");
  });
});

/** The examples' operators on target cloudrun, as `crdfn generate` writes them into `<dir>/deploy`. */
async function examplesOnCloudRun(dir: string): Promise<{ dir: string; generated: Generated }> {
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
  const generated = await generate([], { settings: "crdfn.deploy.yaml" }, dir);
  writeGenerated(generated);
  return { dir, generated };
}

interface CheckovCheck {
  check_id: string;
  check_name: string;
  resource: string;
  file_path: string;
  file_line_range: [number, number];
}
interface CheckovReport {
  check_type: string;
  summary: { parsing_errors: number };
  results: { passed_checks?: CheckovCheck[]; failed_checks: CheckovCheck[]; skipped_checks?: CheckovCheck[] };
}

function readJson(file: string): Record<string, unknown> | undefined {
  try {
    return JSON.parse(readFileSync(file, "utf8")) as Record<string, unknown>;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw e;
  }
}
