// Loading operators: a module whose default export is defineOperator(...), written by a user
// (any folder, TypeScript or JavaScript) or shipped as an example in this checkout.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { parse } from "yaml";
import { parseDevSettings, parseSettingsOperators } from "../deploy/settings.ts";
import type { Operator } from "../core/operator.ts";
import { SetupError } from "../emulator/errors.ts";
import { packageRoot } from "../emulator/paths.ts";
import { importBundled } from "./bundle.ts";

/** The deploy settings a command reads when none is named (`--settings`), from the folder it runs in. */
export const DEFAULT_SETTINGS = "crdfn.deploy.yaml";

function isOperator(x: unknown): x is Operator<unknown> {
  const o = x as Partial<Operator<unknown>> | undefined;
  return typeof o?.reconcile === "function" && typeof o.resource?.kind === "string" && Array.isArray(o.owns);
}

export async function loadOperator(file: string): Promise<Operator<unknown>> {
  return (await loadOperatorWithInputs(file)).operator;
}

/** A file as a person finds it from where they ran the command. */
const shown = (file: string): string => {
  const near = relative(process.cwd(), resolve(file));
  return near === "" || near.startsWith("..") ? resolve(file) : near;
};

/** esbuild's refusal (a syntax or resolution error): its first message, at its file:line:column. */
interface BuildFailure {
  errors: Array<{ text: string; location: { file: string; line: number; column: number } | null }>;
}
const isBuildFailure = (e: unknown): e is BuildFailure => Array.isArray((e as Partial<BuildFailure> | undefined)?.errors);

/**
 * Where a throw at import happened, as `path:line:column` (through the bundle's source map): the
 * frame in the operator's module, else the first outside node_modules (a file it imports).
 */
function throwSite(e: unknown, entry: string): string | undefined {
  const stack = (e as { stack?: unknown } | undefined)?.stack;
  if (typeof stack !== "string") return undefined;
  const frames = [...stack.matchAll(/[\s(](?:file:\/\/)?(\/[^\s():]+):(\d+):(\d+)/g)].map((m) => ({ path: decodeURIComponent(m[1]!), at: `${m[2]}:${m[3]}` }));
  const site = frames.find((f) => f.path === entry) ?? frames.find((f) => !f.path.includes("/node_modules/") && !f.path.endsWith(".crdfn.mjs"));
  return site && `${shown(site.path)}:${site.at}`;
}

/** loadOperator, and the files it is built from (the module and what it imports). */
export async function loadOperatorWithInputs(file: string): Promise<{ operator: Operator<unknown>; inputs: string[] }> {
  // Named as the person named it: a --operator value, a command's argument, a settings entry.
  if (!existsSync(file)) throw new SetupError(`${shown(file)}: no such file`);
  let loaded: { module: unknown; inputs: string[] };
  // The source map of the bundle is read when it is imported, and only while they are enabled:
  // a throw's frame then names the operator's own file and line.
  const mapped = process.sourceMapsEnabled;
  process.setSourceMapsEnabled(true);
  try {
    loaded = await importBundled(file);
  } catch (e) {
    if (isBuildFailure(e)) {
      const first = e.errors[0];
      const where = first?.location ? resolve(first.location.file) : resolve(file);
      const at = first?.location ? `:${first.location.line}:${first.location.column + 1}` : "";
      const by = where === resolve(file) ? "" : ` (imported by ${shown(file)})`;
      throw new SetupError(`${shown(where)}${at}: ${first?.text ?? "esbuild failed"}${by}`);
    }
    if ((e as { code?: unknown }).code === "ERR_MODULE_NOT_FOUND")
      throw new SetupError(`${shown(file)}: cannot load it: ${(e as Error).message.split("\n")[0]} (is the package installed?)`);
    const site = throwSite(e, resolve(file));
    const what = e instanceof Error ? `${e.name}: ${e.message.split("\n")[0]}` : String(e);
    throw new SetupError(`${shown(file)}: threw while it was imported${site ? ` at ${site}` : ""}: ${what}`);
  } finally {
    process.setSourceMapsEnabled(mapped);
  }
  const mod = loaded.module as { default?: unknown };
  if (!isOperator(mod.default)) throw new SetupError(`${shown(file)}: its default export is not defineOperator({...})`);
  return { operator: mod.default, inputs: loaded.inputs };
}

const examplesDir = join(packageRoot, "examples");

/** The example operators' modules; only a checkout of crdfn has them. */
export function exampleFiles(): string[] {
  if (!existsSync(examplesDir)) return [];
  return readdirSync(examplesDir, { withFileTypes: true })
    .filter((d) => d.isDirectory() && existsSync(join(examplesDir, d.name, "operator.ts")))
    .map((d) => join(examplesDir, d.name, "operator.ts"))
    .sort();
}

/** Sample objects of the examples (`examples/<name>/sample.yaml`); of those `files` names when given. */
export function exampleSamples(files: readonly string[] = exampleFiles()): string[] {
  return files
    .filter((f) => exampleFiles().includes(f))
    .map((f) => join(f, "..", "sample.yaml"))
    .filter((f) => existsSync(f));
}

/**
 * Why an example cannot run on a dev target, if it cannot: one that calls AWS in its effects
 * (`cloud.aws`: the Queue example makes SQS queues) has no AWS on the Cloud Run target, which
 * runs the Pub/Sub emulator and no SQS, and would retry "Region is missing" for minutes.
 * Only the examples are left out: an operator the user names runs, and says what it lacks itself.
 */
export function exampleLeftOut(operator: Operator<unknown>, target: string): string | undefined {
  if (target !== "cloudrun" || (operator.cloud?.aws?.length ?? 0) === 0) return undefined;
  return `${operator.resource.kind} example left out: its effects call AWS (cloud.aws), and the Cloud Run target runs no SQS`;
}

/** The operator modules a command runs: the given files, else (or also) the examples of this checkout. */
export function operatorFiles(files: string[] | undefined, withExamples: boolean): string[] {
  const useExamples = withExamples || !files?.length;
  const examples = useExamples ? exampleFiles() : [];
  if (useExamples && examples.length === 0 && !files?.length) {
    throw new SetupError("no operator given: name your operator module with --operator operator.ts");
  }
  return [...examples, ...(files ?? [])];
}

/** Refuses two operators of one resource. */
export function checkDistinct(operators: ReadonlyArray<Operator<unknown>>): void {
  const seen = new Set<string>();
  for (const op of operators) {
    const key = `${op.resource.plural}.${op.resource.group}`;
    if (seen.has(key)) throw new SetupError(`two operators manage ${key}`);
    seen.add(key);
  }
}

/** The operators a command runs: the given files, else the examples of this checkout. */
export async function selectOperators(files: string[] | undefined, withExamples: boolean): Promise<Operator<unknown>[]> {
  const all = await Promise.all(operatorFiles(files, withExamples).map(loadOperator));
  checkDistinct(all);
  return all;
}

/**
 * The operator modules a project's deploy settings list (`operators[].module`, relative to the
 * file), as `crdfn generate` reads them; none when the file is absent or lists none. Only the list
 * is read: the values crdfn cannot know may still be empty, as `crdfn init` leaves them.
 */
export function settingsOperatorFiles(file: string): string[] {
  if (!existsSync(file)) return [];
  return parseSettingsOperators(settingsYaml(file), shown(file)).map((o) => resolve(dirname(file), o.module));
}

/** A deploy settings file's YAML, or a SetupError naming it. */
function settingsYaml(file: string): unknown {
  try {
    return parse(readFileSync(file, "utf8"));
  } catch (e) {
    throw new SetupError(`${shown(file)}: not YAML: ${(e as Error).message.split("\n")[0]}`);
  }
}

/** What `crdfn dev` takes of ./crdfn.deploy.yaml (`file`, relative to the folder it runs in), validated; undefined when there is none. */
export function devSettings(file: string = DEFAULT_SETTINGS): ReturnType<typeof parseDevSettings> | undefined {
  if (!existsSync(file)) return undefined;
  return parseDevSettings(settingsYaml(file), file);
}

/**
 * The operators of the project a command runs in: those its deploy settings list (`file`, as
 * `crdfn generate` reads it; said on stderr), else the examples of this checkout.
 */
export async function projectOperators(file: string): Promise<Operator<unknown>[]> {
  const listed = settingsOperatorFiles(resolve(file));
  if (listed.length === 0) return selectOperators(undefined, false);
  console.error(`crdfn: operators from ./${file} (--operator names others)`);
  return selectOperators(listed, false);
}
