// The upload of the Cloud Run functions, bundled as the Lambda's is: Cloud Build installs the
// uploaded folder's dependencies from the npm registry, so the project folder itself cannot go
// (a crdfn installed from its tarball is `file:…`, a TypeScript main needs a build). One module
// holds the project's main with crdfn and everything else it imports; beside it, a package.json
// that depends only on what must stay a package: functions-framework, whose copy registers the
// functions that its CLI then serves, and the Pub/Sub client, loaded on a deferral's first re-send
// (it reads its protos from disk). `terraform plan` runs this (`crdfn bundle --terraform`), so
// every apply uploads the code as it is on disk, as `serverless deploy` does.
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, relative, resolve } from "node:path";
import { build } from "esbuild";
import { Command } from "commander";
import { SetupError } from "../../emulator/errors.ts";
import { packageRoot } from "../../emulator/paths.ts";
import { ESM_REQUIRE_BANNER } from "../bundle.ts";
import { kubeConfigOnly } from "../esbuild-plugins.ts";

/** What stays a package in the upload, installed by Cloud Build from the registry. */
const KEPT_PACKAGES = ["@google-cloud/functions-framework", "@google-cloud/pubsub"] as const;
/** The bundle's file name in the upload (its package.json main). */
export const BUNDLE_MAIN = "index.mjs";

interface SourceManifest {
  name?: unknown;
  version?: unknown;
  main?: unknown;
  engines?: unknown;
}

/**
 * The source folder's package.json and its main, which must register every operator's function
 * (crdfn init's http.ts does): refused in one line when either is missing.
 */
export function sourceMain(dir: string, shown: (file: string) => string = (f) => relative(process.cwd(), f) || f): { manifest: SourceManifest; main: string } {
  const pkg = join(dir, "package.json");
  if (!existsSync(pkg))
    throw new SetupError(
      `gcp.source: no package.json in ${shown(dir)}: the functions' source folder is a Node project whose main registers each operator's function`,
    );
  let manifest: SourceManifest;
  try {
    manifest = JSON.parse(readFileSync(pkg, "utf8")) as SourceManifest;
  } catch (e) {
    throw new SetupError(`${shown(pkg)}: not JSON: ${(e as Error).message}`);
  }
  const main = manifest.main;
  if (typeof main !== "string" || main === "")
    throw new SetupError(
      `${shown(pkg)}: set "main" to the module that registers each operator's function (crdfn init's http.ts does: http("<operator>", httpHandler(operator))); Cloud Run loads it`,
    );
  if (!existsSync(join(dir, main))) throw new SetupError(`${shown(pkg)}: main ${main} does not exist`);
  return { manifest, main: join(dir, main) };
}

/** The version of `name` that `from` resolves (its package.json found above its entry), else crdfn's own range for it. */
function keptVersion(name: string, from: string): string {
  try {
    let dir = dirname(createRequire(join(from, "package.json")).resolve(name));
    for (; dirname(dir) !== dir; dir = dirname(dir)) {
      const file = join(dir, "package.json");
      if (!existsSync(file)) continue;
      const pkg = JSON.parse(readFileSync(file, "utf8")) as { name?: string; version?: string };
      if (pkg.name === name && pkg.version) return pkg.version;
    }
  } catch {
    // Not installed where the source is: crdfn's own dependency range names one.
  }
  const own = JSON.parse(readFileSync(join(packageRoot, "package.json"), "utf8")) as { dependencies?: Record<string, string> };
  const range = own.dependencies?.[name];
  if (!range) throw new SetupError(`${name}: not installed in ${from} and not a dependency of crdfn: npm install ${name}`);
  return range;
}

export interface BundledSource {
  /** The upload folder (absolute). */
  dir: string;
  /** Its package.json dependencies: registry versions only. */
  dependencies: Record<string, string>;
  /** The bundle's size in bytes. */
  bytes: number;
}

/** esbuild's first error as one line, with where it is. */
function buildError(e: unknown): string {
  const first = (e as { errors?: Array<{ text: string; location?: { file: string; line: number; column: number } | null }> }).errors?.[0];
  if (!first) return (e as Error).message.split("\n")[0] ?? String(e);
  const at = first.location ? `${first.location.file}:${first.location.line}:${first.location.column}: ` : "";
  return `${at}${first.text}`;
}

/** Bundles the source folder's main into `out` (emptied first) with a package.json Cloud Build can install. */
export async function bundleCloudRunSource(source: string, out: string): Promise<BundledSource> {
  const dir = resolve(source);
  const target = resolve(out);
  const { manifest, main } = sourceMain(dir);
  rmSync(target, { recursive: true, force: true });
  mkdirSync(target, { recursive: true });
  const result = await build({
    entryPoints: [main],
    outfile: join(target, BUNDLE_MAIN),
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node22",
    metafile: true,
    // As the Lambda's bundle (serverless.yml custom.esbuild): less to load on a cold start.
    minify: true,
    logLevel: "silent",
    external: [...KEPT_PACKAGES],
    // A crdfn run from its checkout bundles its sources; an installed one ships JavaScript only.
    conditions: existsSync(join(packageRoot, "core", "index.ts")) ? ["crdfn-source"] : [],
    plugins: [kubeConfigOnly],
    banner: { js: ESM_REQUIRE_BANNER },
  }).catch((e: unknown) => {
    throw new SetupError(`bundling ${relative(process.cwd(), main) || main} for Cloud Run: ${buildError(e)}`);
  });
  const imported = new Set(Object.values(result.metafile.outputs).flatMap((output) => output.imports.filter((i) => i.external).map((i) => i.path)));
  const dependencies = Object.fromEntries(KEPT_PACKAGES.filter((name) => imported.has(name)).map((name) => [name, keptVersion(name, dir)]));
  const name = typeof manifest.name === "string" && manifest.name ? manifest.name : "crdfn-functions";
  writeFileSync(
    join(target, "package.json"),
    `${JSON.stringify({ name: `${name}-cloudrun`, version: typeof manifest.version === "string" ? manifest.version : "0.0.0", private: true, type: "module", main: BUNDLE_MAIN, ...(manifest.engines ? { engines: manifest.engines } : {}), dependencies }, null, 2)}\n`,
  );
  const bytes = Object.values(result.metafile.outputs).reduce((sum, output) => sum + output.bytes, 0);
  return { dir: target, dependencies, bytes };
}

/** Terraform's external data source protocol: a JSON object on stdin, one of strings on stdout. */
async function readQuery(): Promise<Record<string, unknown>> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  const text = Buffer.concat(chunks).toString("utf8").trim();
  try {
    const query = text ? (JSON.parse(text) as unknown) : {};
    if (typeof query !== "object" || query === null || Array.isArray(query)) throw new Error("not a JSON object");
    return query as Record<string, unknown>;
  } catch (e) {
    throw new SetupError(`crdfn bundle --terraform: stdin is not Terraform's query (${(e as Error).message})`);
  }
}

export function bundleCommand(): Command {
  return new Command("bundle")
    .description(
      "bundle the Cloud Run functions' source (package.json main) into one upload folder that Cloud Build can install: what the generated Terraform uploads",
    )
    .option("--source <dir>", "the functions' source folder (default: the current folder)", ".")
    .option("--out <dir>", "the upload folder, emptied first", ".crdfn/cloudrun-source")
    .option("--terraform", 'as Terraform\'s external data source runs it: {"out": dir} on stdin, {"dir": …} on stdout, progress on stderr')
    .addHelpText(
      "after",
      `
The generated <out>/gcp/main.tf.json runs it on every terraform plan and apply, from the source
folder, so the upload is the code on disk:
  data "external" "source" { program = ["npx", "--no", "crdfn", "bundle", "--terraform"] }

Examples:
  $ npx crdfn bundle                       # .crdfn/cloudrun-source/{index.mjs,package.json}
  $ npx crdfn bundle --out /tmp/upload && (cd /tmp/upload && npm install && npx functions-framework --target motd)`,
    )
    .action(async (options: { source: string; out: string; terraform?: boolean }) => {
      const query = options.terraform ? await readQuery() : {};
      const out = typeof query.out === "string" && query.out ? query.out : options.out;
      const bundled = await bundleCloudRunSource(options.source, out);
      const line = `bundled ${relative(process.cwd(), resolve(options.source)) || "."} into ${bundled.dir} (${(bundled.bytes / 1024 / 1024).toFixed(1)} MiB; from the registry: ${
        Object.entries(bundled.dependencies)
          .map(([n, v]) => `${n}@${v}`)
          .join(", ") || "nothing"
      })`;
      if (options.terraform) {
        process.stderr.write(`${line}\n`);
        process.stdout.write(`${JSON.stringify({ dir: bundled.dir })}\n`);
      } else console.log(line);
    });
}
