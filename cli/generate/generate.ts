// `crdfn generate`: every file a deployment needs, written from the operators and a few settings
// (deploy/files.ts), and `--check`, which fails when a committed file differs from them.
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { Command } from "commander";
import { parse as parseYaml } from "yaml";
import { deployFiles, type GeneratedOperator } from "../../deploy/files.ts";
import { parseDeploySettings, type DeploySettings, type Unknowable } from "../../deploy/settings.ts";
import { SetupError } from "../../emulator/errors.ts";
import { sourceMain } from "./bundle-command.ts";
import { clusterStoredVersions, keptNotes, refuseDroppedVersions } from "./crd-versions.ts";
import { DEFAULT_SETTINGS, loadOperator } from "../operators.ts";

export interface GenerateFlags {
  settings?: string;
  project?: string;
  /** Read each CRD's status.storedVersions from this cluster and keep them. */
  kubeconfig?: string;
  context?: string;
  out?: string;
  cluster?: string;
  namespace?: string[];
  functionsNamespace?: string;
  bridgeImage?: string;
  queuePrefix?: string;
  queueUrlBase?: string;
  region?: string;
  target?: string;
  gcpProject?: string;
  gcpRegion?: string;
  gkeCluster?: string;
}

export interface Generated {
  /** Absolute output folder. */
  outDir: string;
  files: Map<string, string>;
  settings: DeploySettings;
  /** The settings file read, and whether it was found in the current folder rather than named. */
  settingsFile?: { path: string; found: boolean };
  /** Lines for the person running it (CRD versions kept because the cluster stores them). */
  notes: string[];
}

/** The flag that gives each value crdfn cannot know, for the one-line refusal. */
const FLAG_OF: Record<Unknowable, string> = {
  project: "--project",
  cluster: "--cluster",
  "bridge.image": "--bridge-image",
  "queues.urlBase": "--queue-url-base",
  "gcp.project": "--gcp-project",
  "gcp.region": "--gcp-region",
  "gcp.gkeCluster": "--gke-cluster",
};

/** A Lambda handler (`dir/file.export`, relative to serverless.yml) must name a module that exists. */
const HANDLER_EXTENSIONS = [".ts", ".mts", ".js", ".mjs", ".cjs"];
function handlerModule(base: string, handler: string): string | undefined {
  const file = handler.slice(0, handler.lastIndexOf("."));
  return HANDLER_EXTENSIONS.map((ext) => join(base, file + ext)).find((f) => existsSync(f));
}

/** Settings (file, then flags over it) → the operators loaded → the files. */
export async function generate(operatorFiles: string[], flags: GenerateFlags, cwd = process.cwd()): Promise<Generated> {
  const settingsFile = flags.settings ? resolve(cwd, flags.settings) : existsSync(join(cwd, DEFAULT_SETTINGS)) ? join(cwd, DEFAULT_SETTINGS) : undefined;
  if (flags.settings && !existsSync(settingsFile!)) throw new SetupError(`--settings ${flags.settings}: no such file`);
  let raw: Record<string, unknown> = {};
  if (settingsFile) {
    try {
      raw = (parseYaml(readFileSync(settingsFile, "utf8")) ?? {}) as Record<string, unknown>;
    } catch (e) {
      throw new SetupError(`${settingsFile}: not YAML: ${(e as Error).message.split("\n")[0]}`);
    }
  }
  const base = settingsFile ? dirname(settingsFile) : cwd;
  const over = (key: string, value: unknown) => (value === undefined ? {} : { [key]: value });
  const bridge = { ...(raw.bridge as object | undefined), ...over("image", flags.bridgeImage) };
  const queues = {
    ...(raw.queues as object | undefined),
    ...over("prefix", flags.queuePrefix),
    ...over("urlBase", flags.queueUrlBase),
    ...over("region", flags.region),
  };
  const gcp = {
    ...(raw.gcp as object | undefined),
    ...over("project", flags.gcpProject),
    ...over("region", flags.gcpRegion),
    ...over("gkeCluster", flags.gkeCluster),
  };
  const merged = {
    ...raw,
    ...over("project", flags.project),
    ...over("out", flags.out),
    ...over("cluster", flags.cluster),
    ...over("namespaces", flags.namespace),
    ...over("functionsNamespace", flags.functionsNamespace),
    ...(Object.keys(bridge).length ? { bridge } : {}),
    ...(Object.keys(queues).length ? { queues } : {}),
    ...over("target", flags.target),
    ...(Object.keys(gcp).length ? { gcp } : {}),
  };
  const source = settingsFile ? relative(cwd, settingsFile) || settingsFile : "flags";
  const settings = parseDeploySettings(merged, source, FLAG_OF);
  // A module named on the command line that the settings list too is the same operator, once.
  const listed = settings.operators.map((o, i) => ({
    file: resolve(base, o.module),
    handler: o.handler,
    entryPoint: o.function,
    where: `${source}: operators.${i}`,
  }));
  const named = operatorFiles.map((f) => resolve(cwd, f)).filter((f) => !listed.some((l) => l.file === f));
  const modules = [...listed, ...named.map((file) => ({ file, handler: undefined, entryPoint: undefined, where: relative(cwd, file) || file }))];
  if (modules.length === 0)
    throw new SetupError(`no operator given: name its module (crdfn generate operator.ts) or list it under operators: in ${DEFAULT_SETTINGS}`);
  const operators: GeneratedOperator[] = [];
  const seen = new Map<string, string>();
  const handlers = new Map<string, string>();
  const shown = (file: string) => relative(cwd, file) || file;
  for (const m of modules) {
    const operator = await loadOperator(m.file);
    const key = `${operator.resource.plural}.${operator.resource.group}`;
    const other = seen.get(key);
    if (other) throw new SetupError(`two operators manage ${key}: ${other} and ${shown(m.file)}`);
    seen.set(key, shown(m.file));
    // serverless.yml sits beside the settings (or in the current folder); its handlers are relative to it.
    const handler =
      m.handler ??
      `${relative(base, join(dirname(m.file), "lambda"))
        .split("\\")
        .join("/")}.handler`;
    if (settings.target === "cloudrun") {
      // Cloud Run loads the source folder's main, which registers every operator's function: no Lambda entry.
      operators.push({ operator, handler, ...(m.entryPoint ? { entryPoint: m.entryPoint } : {}) });
      continue;
    }
    const origin = m.handler ? `handler ${handler}` : `handler ${handler} (the default: lambda.handler beside ${shown(m.file)})`;
    if (!handlerModule(base, handler)) {
      throw new SetupError(
        `${m.where}: ${origin}: no ${handler.slice(0, handler.lastIndexOf("."))}.ts or .js in ${relative(cwd, base) || "."}; write that Lambda entry (crdfn init writes one) or name yours with handler: in ${DEFAULT_SETTINGS}`,
      );
    }
    const twice = handlers.get(handler);
    if (twice)
      throw new SetupError(
        `${m.where}: ${origin} is also ${twice}'s: one Lambda entry serves one operator; name each one's with handler: in ${DEFAULT_SETTINGS}`,
      );
    handlers.set(handler, operator.resource.kind);
    operators.push({ operator, handler });
  }
  // Cloud Run loads the source folder's main (bundled by `crdfn bundle` when Terraform runs): it must be there now.
  if (settings.target === "cloudrun") sourceMain(resolve(base, settings.gcp.source), shown);
  const outDir = resolve(base, settings.out);
  const ops = operators.map((o) => o.operator);
  let stored = new Map<string, string[]>();
  if (flags.kubeconfig)
    stored = await clusterStoredVersions({ kubeconfig: resolve(cwd, flags.kubeconfig), ...(flags.context ? { context: flags.context } : {}) }, ops);
  else refuseDroppedVersions(ops, join(outDir, "crds"), join(relative(cwd, outDir) || ".", "crds"));
  return {
    outDir,
    files: deployFiles(operators, settings, stored, base),
    settings,
    ...(settingsFile ? { settingsFile: { path: settingsFile, found: !flags.settings } } : {}),
    notes: keptNotes(ops, stored),
  };
}

/**
 * The served namespaces are the user's: generate writes only crdfn's own (the bridge's and the
 * functions'), since `kubectl delete -k` deletes what the kustomization lists, and a served
 * namespace holds the user's objects. Said after every write, as the apply would fail without them.
 */
export function servedNamespacesLine(s: Pick<DeploySettings, "namespaces">): string | undefined {
  if (s.namespaces.length === 0) return undefined;
  return `the served namespaces (${s.namespaces.join(", ")}) must exist before kubectl apply -k: crdfn does not write them, as kubectl delete -k would delete them and everything in them`;
}

/** Writes the generated files under their output folder. */
export function writeGenerated(g: Pick<Generated, "outDir" | "files">): void {
  for (const [file, text] of g.files) {
    mkdirSync(dirname(join(g.outDir, file)), { recursive: true });
    writeFileSync(join(g.outDir, file), text);
  }
}

/** Folders the generator owns entirely: a file there that it no longer writes is stale too. */
const OWNED_DIRS = ["crds", "functions", "bridge", "serverless", "gcp"];

/** The files under outDir that differ from what the generator writes now (missing, edited, or left over). */
export function staleFiles(g: Pick<Generated, "outDir" | "files">): string[] {
  const stale: string[] = [];
  for (const [file, text] of g.files) {
    const path = join(g.outDir, file);
    if (!existsSync(path)) stale.push(`${file} (missing)`);
    else if (readFileSync(path, "utf8") !== text) stale.push(`${file} (differs)`);
  }
  for (const dir of OWNED_DIRS) {
    if (!existsSync(join(g.outDir, dir))) continue;
    // Not the tools' own files beside them (terraform init and apply write .terraform/, state, .build/).
    for (const f of readdirSync(join(g.outDir, dir)))
      if (!g.files.has(`${dir}/${f}`) && !/^\.|^terraform\.tfstate/.test(f)) stale.push(`${dir}/${f} (not generated)`);
  }
  return stale.sort();
}

export function generateCommand(): Command {
  const collect = (v: string, prev: string[] = []) => [
    ...prev,
    ...v
      .split(",")
      .map((s) => s.trim())
      .filter(Boolean),
  ];
  return new Command("generate")
    .description(
      "write the CRDs, the functions' RBAC and admission policies, the bridge's manifests, a kustomization and the Serverless resources for your operators",
    )
    .argument("[operator-files...]", "modules whose default export is defineOperator({...}) (added to the settings' operators)")
    .option("--settings <file>", `deploy settings (YAML; default: ./${DEFAULT_SETTINGS} when present, which it says)`)
    .option("--project <name>", "this project's name: its bridge is crdfn-bridge-<name>, so projects sharing a cluster keep theirs (required)")
    .option("--out <dir>", "output folder (default: the settings' out, else ./deploy)")
    .option("--cluster <name>", "the cluster name the bridge puts in every event (required)")
    .option(
      "--namespace <ns>",
      "a namespace the operators serve (repeatable or comma-separated); each identity's grants are Roles there; it must exist (crdfn never writes it)",
      collect,
    )
    .option("--functions-namespace <ns>", "where the functions' ServiceAccounts live (default crdfn-functions)")
    .option("--bridge-image <ref>", "the bridge's container image, built from node_modules/crdfn/infra/bridge/Dockerfile (required)")
    .option("--queue-prefix <prefix>", "queue names are <prefix><operator>.fifo and <prefix><operator>-dlq.fifo (default crdfn-<project>-)")
    .option("--queue-url-base <url>", "https://sqs.<region>.amazonaws.com/<account id>, for the bridge's queue URLs (required)")
    .option("--region <region>", "the queues' AWS region (default: the one in --queue-url-base)")
    .option("--target <target>", "where the functions run: lambda (default; serverless.yml) or cloudrun (Pub/Sub push, Terraform in <out>/gcp)")
    .option("--gcp-project <id>", "cloudrun: the Google Cloud project of the functions, topics and GKE cluster (required)")
    .option("--gcp-region <region>", "cloudrun: the functions' region (required)")
    .option("--gke-cluster <name>", "cloudrun: the GKE cluster the bridge runs in and the functions serve (required)")
    .option(
      "--kubeconfig <file>",
      "keep in each CRD the versions this cluster still stores objects as (status.storedVersions); without it, a version the CRD written before could store is never dropped",
    )
    .option("--context <name>", "with --kubeconfig: its context (default: the current one)")
    .option("--check", "write nothing; exit 1 listing every file that differs from what would be written")
    .addHelpText(
      "after",
      `
${DEFAULT_SETTINGS} (crdfn init writes one):
  project: shop                 # names this project's bridge: crdfn-bridge-shop
  operators: [{ module: src/operator.ts, handler: src/lambda.handler }]
  out: deploy
  cluster: prod                 # the name in every event (your EKS cluster's, say)
  namespaces: [shop]            # served (required once a kind is namespaced); they must exist: crdfn never writes them
  bridge: { image: 123456789012.dkr.ecr.eu-west-1.amazonaws.com/shop-bridge:0.1.0 }
  queues: { urlBase: https://sqs.eu-west-1.amazonaws.com/123456789012 }   # prefix: crdfn-<project>-
  # or, for Cloud Run functions (writes <out>/gcp/main.tf.json instead of the Serverless resources):
  # target: cloudrun
  # gcp: { project: my-project, region: europe-west1, gkeCluster: prod }  # source: . (package.json main)

What crdfn cannot know (project, cluster, bridge.image, queues.urlBase; on Cloud Run gcp.project,
gcp.region, gcp.gkeCluster) has no default: a missing one is refused, naming each, instead of
written as a placeholder.

A CRD keeps every version objects may still be stored as: declared retired in the operator
(resource.versions: [{ name: "v1beta1", served: false }, …]), or read from the cluster with
--kubeconfig. Without either, dropping the storage version of the CRD written before is refused.

Examples:
  $ crdfn generate operator.ts --project shop --cluster prod --bridge-image <image> --queue-url-base https://sqs.eu-west-1.amazonaws.com/<account id>
  $ crdfn generate --settings ${DEFAULT_SETTINGS}          # operators and settings from the file
  $ crdfn generate --check                                # in CI: fail when deploy files are stale
  $ crdfn generate --kubeconfig ~/.kube/config            # keep the versions the cluster still stores
  $ kubectl apply --server-side -k deploy                 # then: npx serverless deploy`,
    )
    .action(async (files: string[], o: GenerateFlags & { check?: boolean }) => {
      const g = await generate(files, o);
      if (g.settingsFile?.found) console.error(`crdfn: settings from ./${DEFAULT_SETTINGS} (found in the current folder; --settings names another)`);
      for (const note of g.notes) console.error(`crdfn: ${note}`);
      const where = relative(process.cwd(), g.outDir) || ".";
      if (o.check) {
        const stale = staleFiles(g);
        if (stale.length === 0) return console.log(`${where}: ${g.files.size} files up to date`);
        console.error(`${where} is stale (run crdfn generate):\n${stale.map((f) => `  ${f}`).join("\n")}`);
        process.exitCode = 1;
        return;
      }
      writeGenerated(g);
      const served = servedNamespacesLine(g.settings);
      if (served) console.error(`crdfn: ${served}`);
      if (g.settings.target === "cloudrun")
        console.log(
          `wrote ${g.files.size} files into ${where}/ — GCP: cd ${where}/gcp && terraform init && terraform apply; then kubectl apply --server-side -k ${where}`,
        );
      else
        console.log(
          `wrote ${g.files.size} files into ${where}/ — apply: kubectl apply --server-side -k ${where}; serverless.yml: functions: \${file(./${where}/serverless/functions.yml)}, resources: \${file(./${where}/serverless/resources.yml)}`,
        );
    });
}
