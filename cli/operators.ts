// Loading operators a user wrote (a module whose default export is defineOperator(...)).
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import type { Operator } from "../core/operator.ts";
import { SetupError } from "../emulator/errors.ts";
import { operators as examples } from "../functions/operators.ts";

function isOperator(x: unknown): x is Operator<unknown> {
  const o = x as Partial<Operator<unknown>> | undefined;
  return typeof o?.reconcile === "function" && typeof o.resource?.kind === "string" && Array.isArray(o.owns);
}

export async function loadOperator(file: string): Promise<Operator<unknown>> {
  let mod: { default?: unknown };
  try {
    mod = (await import(pathToFileURL(resolve(file)).href)) as { default?: unknown };
  } catch (e) {
    throw new SetupError(`--operator ${file}: cannot load it: ${(e as Error).message.split("\n")[0]}`);
  }
  if (!isOperator(mod.default)) throw new SetupError(`--operator ${file}: its default export is not defineOperator({...})`);
  return mod.default;
}

/** The operators a command runs: the given files, else the examples shipped here. */
export async function selectOperators(files: string[] | undefined, withExamples: boolean): Promise<Operator<unknown>[]> {
  const mine = await Promise.all((files ?? []).map(loadOperator));
  const all = [...(withExamples || mine.length === 0 ? examples : []), ...mine];
  const seen = new Set<string>();
  for (const op of all) {
    const key = `${op.resource.plural}.${op.resource.group}`;
    if (seen.has(key)) throw new SetupError(`two operators manage ${key}`);
    seen.add(key);
  }
  return all;
}
