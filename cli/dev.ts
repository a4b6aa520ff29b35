// `crdfn dev` / `npm start`: the local emulator, end to end, in the foreground.
import { readFileSync } from "node:fs";
import { KubernetesObjectApi, PatchStrategy, loadAllYaml, type KubernetesObject } from "@kubernetes/client-node";
import { Command } from "commander";
import { pino } from "pino";
import { startCluster } from "../emulator/cluster.ts";
import { SetupError } from "../emulator/errors.ts";
import { writeStateDir } from "./cluster.ts";
import { exampleSamples, selectOperators } from "./operators.ts";
import { startPipeline, type ReconcileRecord } from "./pipeline.ts";
import { untilSignal } from "./signals.ts";

/** One readable line per reconcile: what, how it ended, how long it took. */
export function reconcileLine(r: ReconcileRecord): string {
  const what = `${r.kind} ${r.name}`;
  const ms = `${Math.round(r.latencyMs)} ms`;
  const where = `${r.namespace ? `ns ${r.namespace}, ` : ""}${r.outcome.apiCalls} API calls${r.reason ? `, ${r.reason}` : ""}`;
  switch (r.outcome.result) {
    case "success":
      return `✔ ${what} reconciled in ${ms} (${where})`;
    case "retry-later":
      return `↻ ${what} reconciled, again in ${r.outcome.delaySeconds}s (${ms}; ${r.outcome.detail})`;
    case "permanent":
      return `✖ ${what} not reconciled: ${r.outcome.detail} (${ms}; fix the object to retry)`;
    case "retry":
      return `! ${what} failed, will be redelivered: ${r.outcome.detail} (${ms})`;
    case "dead-letter":
      return `☠ ${what} message rejected: ${r.outcome.detail}`;
    case "unavailable":
      return `⏸ ${what} deferred, the API server is unavailable: ${r.outcome.detail}`;
  }
}

/** Server-side applies every object of the given YAML files (as field manager crdfn-dev). */
async function applyFiles(api: KubernetesObjectApi, files: string[]): Promise<string[]> {
  const applied: string[] = [];
  for (const file of files) {
    for (const obj of loadAllYaml(readFileSync(file, "utf8")) as KubernetesObject[]) {
      await api.patch(obj, undefined, undefined, "crdfn-dev", true, PatchStrategy.ServerSideApply);
      applied.push(`${obj.kind} ${obj.metadata?.name}`);
    }
  }
  return applied;
}

function kindRequested(wanted: boolean): void {
  if (wanted) {
    throw new SetupError(
      "--kind: a kind cluster needs a Docker engine, and this build only ships the embedded control plane; run `crdfn dev` without --kind",
    );
  }
}

export function devCommand(): Command {
  return new Command("dev")
    .description(
      "run the local emulator end to end: control plane, ElasticMQ, the bridge, the example operators' functions " +
        "and the local poller; apply the sample Greeting and CronTab; print a line per reconcile. Ctrl-C stops everything",
    )
    .option("--state-dir <dir>", "where to write kubeconfig and env", ".crdfn")
    .option("--operator <file...>", "run your operator module(s) (default export defineOperator({...})) instead of the examples")
    .option("--examples", "with --operator: run the example operators too")
    .option("--apply <file...>", "after start-up, server-side apply these YAML files (your sample objects)")
    .option("--no-samples", "do not apply the examples' sample objects")
    .option("--kind", "use a kind cluster (needs Docker and kind)")
    .option("--log-level <level>", "bridge and function log level (pino JSON on stderr)", "warn")
    .addHelpText(
      "after",
      "\nExamples:\n  $ crdfn dev                                          # the examples of a crdfn checkout\n" +
        "  $ crdfn dev --operator operator.ts --apply sample.yaml  # your operator and its sample object",
    )
    .action(async (o: { stateDir: string; operator?: string[]; examples?: boolean; apply?: string[]; samples: boolean; kind?: boolean; logLevel: string }) => {
      kindRequested(o.kind === true);
      const operators = await selectOperators(o.operator, o.examples === true);
      const examplesRunning = !o.operator || o.examples === true;
      const t0 = Date.now();
      const say = (line: string) => console.log(line);
      const cluster = await startCluster({ log: (l) => say(l) });
      const stopAll: Array<() => Promise<void>> = [() => cluster.stop()];
      try {
        const files = writeStateDir(o.stateDir, cluster);
        const logger = pino({ level: o.logLevel }, pino.destination(2));
        const pipeline = await startPipeline({ cluster, operators, logger, functionLogLevel: o.logLevel, onReconcile: (r) => say(reconcileLine(r)) });
        stopAll.unshift(() => pipeline.stop());
        say(`crdfn dev ready in ${((Date.now() - t0) / 1000).toFixed(1)}s — operators: ${operators.map((op) => op.resource.kind).join(", ")}`);
        say(`  kubectl --kubeconfig ${files.kubeconfig} get ${operators.map((op) => op.resource.plural).join(",")}`);
        say(`  environment for other tools: set -a; . ${files.env}; set +a`);
        say(`  Ctrl-C stops everything.`);
        const toApply = [...(o.samples && examplesRunning ? exampleSamples() : []), ...(o.apply ?? [])];
        if (toApply.length > 0) {
          const applied = await applyFiles(KubernetesObjectApi.makeApiClient(cluster.kubeConfig), toApply);
          say(`applied: ${applied.join(", ")}`);
        }
        await untilSignal();
        say("stopping…");
      } finally {
        for (const stop of stopAll) await stop();
      }
      say("stopped");
    });
}
