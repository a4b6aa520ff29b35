// `crdfn trace KIND/NAME`: an object's last changes as waterfalls in the terminal, for a user
// without a browser; the same changes the trace page of `crdfn dev --trace` shows (trace-page/).
import { positiveInteger } from "../flags.ts";
import { Command } from "commander";
import { SetupError } from "../../emulator/errors.ts";
import { readTraceState } from "../trace-page/state.ts";
import { findChanges, objectIs, waterfall } from "../trace-page/traces.ts";

interface TraceOptions {
  namespace?: string;
  last: string;
  query?: string;
  lookback: string;
  stateDir: string;
}

/** The query API: --query, else the one `crdfn dev --trace` wrote into the state dir. */
function queryOf(o: TraceOptions): string {
  if (o.query !== undefined) {
    if (!URL.canParse(o.query)) throw new SetupError(`--query ${o.query}: not a URL (Jaeger's query API, e.g. http://127.0.0.1:16686)`);
    return o.query;
  }
  const state = readTraceState(o.stateDir);
  if (!state) throw new SetupError(`no trace viewer runs for ${o.stateDir}: start crdfn dev --trace (or give --query URL, Jaeger's query API)`);
  return state.query;
}

export function traceCommand(): Command {
  return new Command("trace")
    .description("print an object's last changes as waterfalls: each span's offset and duration (ms), service and name, the API server's beside the function's")
    .argument("<kind/name>", "the object: its kind (singular or plural, optionally .group) and name, e.g. greeting/hello-world")
    .option("-n, --namespace <ns>", "the object's namespace (default: any)")
    .option("--last <n>", "how many changes, newest first", "3")
    .option("--lookback <minutes>", "how far back to look", "60")
    .option("--query <url>", "Jaeger's query API (default: the viewer crdfn dev --trace runs for --state-dir)")
    .option("--state-dir <dir>", "where crdfn dev wrote its state", ".crdfn")
    .addHelpText(
      "after",
      "\nExamples:\n  $ crdfn trace greeting/hello-world                  # with crdfn dev --trace running here\n" +
        "  $ crdfn trace crontabs/my-new-cron-object --last 1\n" +
        "  $ crdfn trace greeting/hello-world --query http://127.0.0.1:16686   # any Jaeger holding crdfn's traces",
    )
    .action(async (what: string, o: TraceOptions) => {
      const m = /^([^/]+)\/([^/]+)$/.exec(what);
      if (!m) throw new SetupError(`${what}: name the object as KIND/NAME (e.g. greeting/hello-world)`);
      const last = positiveInteger("--last", o.last);
      const lookbackMs = positiveInteger("--lookback", o.lookback) * 60_000;
      const changes = await findChanges(queryOf(o), { match: objectIs(m[1]!, m[2]!, o.namespace), last, lookbackMs });
      if (changes.length === 0) {
        console.log(`no change of ${what} traced in the last ${o.lookback} min`);
        return;
      }
      console.log(changes.flatMap((c) => [...waterfall(c), ""]).join("\n"));
    });
}
