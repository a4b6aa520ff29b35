// `crdfn key`: the event keys at deploy time. A cluster has one key (its bridge's CRDFN_EVENT_KEY);
// each operator's function holds its operator's key, derived from it (core/event-auth.ts
// operatorKey), so a leak of one function's environment signs for that operator alone.
// `derive` reads the cluster key(s) from stdin, never from an argument (a shell's history and
// `ps` would keep it), and prints what that operator's function's CRDFN_EVENT_KEYS holds.
import { Command } from "commander";
import { formatEventKey, operatorKey, operatorResource, parseEventKey, type EventKey } from "../core/event-auth.ts";
import { SetupError } from "../emulator/errors.ts";
import { newEventKey } from "./local/event-key.ts";
import { selectOperators } from "./operators.ts";

/** The cluster keys on stdin: `<kid>:<secret>`, one a line or comma-separated (two while a key rotates). */
export function clusterKeysOf(text: string, kids: readonly string[] | undefined): EventKey[] {
  const items = text
    .split(/[\n,]/)
    .map((s) => s.trim())
    .filter((s) => s !== "");
  if (items.length === 0) throw new SetupError("stdin holds no cluster key: give it as <kid>:<secret> (e.g. kubectl get secret … | crdfn key derive …)");
  const keys = items.map((item, i) => {
    try {
      return parseEventKey(item);
    } catch (e) {
      throw new SetupError(`cluster key ${i + 1} on stdin: ${(e as Error).message}`);
    }
  });
  if (kids === undefined) return keys;
  const missing = kids.filter((kid) => !keys.some((k) => k.kid === kid));
  if (missing.length > 0) throw new SetupError(`--kid ${missing.join(",")}: no such key on stdin (it has ${keys.map((k) => k.kid).join(", ")})`);
  return keys.filter((k) => kids.includes(k.kid));
}

/**
 * CRDFN_EVENT_KEYS for a function serving `resources`: each key derived for each operator, named
 * by its resource when the function serves several (one operator's function: the bare keys).
 */
export function derivedSetting(clusterKeys: readonly EventKey[], resources: readonly string[]): string {
  const named = resources.length > 1;
  return resources.flatMap((resource) => clusterKeys.map((k) => `${named ? `${resource}:` : ""}${formatEventKey(operatorKey(k, resource))}`)).join(",");
}

async function readStdin(): Promise<string> {
  if (process.stdin.isTTY) throw new SetupError("pipe the cluster key in on stdin (it is never taken as an argument): see crdfn key derive --help");
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

export function keyCommand(): Command {
  const key = new Command("key")
    .description("event keys: a new cluster key, an operator's key derived from it (docs/security.md)")
    .addHelpText("after", "\nExamples:\n  $ crdfn key new > cluster.key\n  $ crdfn key derive --operator operator.ts < cluster.key");
  key
    .command("new")
    .description("print a new random cluster key, <kid>:<secret> (the bridge's CRDFN_EVENT_KEY)")
    .addHelpText("after", "\nExamples:\n  $ crdfn key new > cluster.key   # the bridge's Secret is made from it")
    .action(() => {
      console.log(formatEventKey(newEventKey()));
    });
  key
    .command("derive")
    .description("print an operator's event key(s), derived from the cluster key(s) read from stdin: its function's CRDFN_EVENT_KEYS")
    .option("--operator <file...>", "the operator module(s) whose function it is")
    .option("--resource <plural.group...>", "the operator(s) by resource instead of module, e.g. greetings.example.com")
    .option("--kid <kid...>", "only these of the cluster keys on stdin (default: all of them, e.g. the old and the new one while a key rotates)")
    .addHelpText(
      "after",
      "\nThe cluster key(s), <kid>:<secret>, one a line or comma-separated, are read from stdin. One operator:\n" +
        "its keys as <kid>:<secret>; several (one function serving them all): <plural>.<group>:<kid>:<secret> each.\n" +
        "\nExamples:\n" +
        "  $ crdfn key derive --operator operator.ts < cluster.key\n" +
        "  $ kubectl -n crdfn-system get secret crdfn-bridge-shop-event-key -o jsonpath='{.data.key}' | base64 -d | crdfn key derive --resource greetings.example.com\n" +
        "  $ printf 'k1:…\\nk2:…' | crdfn key derive --operator operator.ts   # during a rotation: both kids",
    )
    .action(async (opts: { operator?: string[]; resource?: string[]; kid?: string[] }) => {
      if ((opts.operator === undefined) === (opts.resource === undefined))
        throw new SetupError("name the operator(s): --operator <file> or --resource <plural>.<group>");
      const resources = opts.resource ?? (await selectOperators(opts.operator, false)).map((op) => operatorResource(op.resource));
      const keys = clusterKeysOf(await readStdin(), opts.kid);
      try {
        console.log(derivedSetting(keys, resources));
      } catch (e) {
        throw new SetupError(`--resource: ${(e as Error).message}`);
      }
    });
  return key;
}
