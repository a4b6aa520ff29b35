// Loading operators: a module whose default export is defineOperator(...), written by a user
// (any folder, TypeScript or JavaScript) or shipped as an example in this checkout.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { parse } from "yaml";
import { parseSettingsOperators } from "../deploy/settings.ts";
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

/** loadOperator, and the files it is built from (the module and what it imports). */
export async function loadOperatorWithInputs(file: string): Promise<{ operator: Operator<unknown>; inputs: string[] }> {
  if (!existsSync(file)) throw new SetupError(`--operator ${file}: no such file`);
  let loaded: { module: unknown; inputs: string[] };
  try {
    loaded = await importBundled(file);
  } catch (e) {
    throw new SetupError(`--operator ${file}: cannot load it: ${(e as Error).message.split("\n").slice(0, 3).join(" ")}`);
  }
  const mod = loaded.module as { default?: unknown };
  if (!isOperator(mod.default)) throw new SetupError(`--operator ${file}: its default export is not defineOperator({...})`);
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
  let raw: unknown;
  try {
    raw = parse(readFileSync(file, "utf8"));
  } catch (e) {
    throw new SetupError(`${file}: not YAML: ${(e as Error).message.split("\n")[0]}`);
  }
  return parseSettingsOperators(raw, file).map((o) => resolve(dirname(file), o.module));
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
