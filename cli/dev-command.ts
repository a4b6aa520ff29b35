// `crdfn dev` / `npm start`: the local emulator, end to end, in the foreground.
import { readFileSync } from "node:fs";
import { KubernetesObjectApi, PatchStrategy, loadAllYaml, type KubernetesObject } from "@kubernetes/client-node";
import { Command } from "commander";
import { pino } from "pino";
import { SetupError } from "../emulator/errors.ts";
import { MAX_RECEIVE_COUNT } from "../emulator/queues.ts";
import {
  existingTarget,
  kindKubeconfig,
  KIND_CLUSTER,
  KIND_CONTEXT,
  refuseClusterRegistry,
  startedTarget,
  type DevTarget,
  type FunctionTarget,
  type PubSubTargetOptions,
} from "./local/dev-target.ts";
import { LOCAL_PUBSUB_PREFIX } from "./local/cloud-run.ts";
import { operatorName } from "../deploy/rbac.ts";
import { crdOf } from "../deploy/crd.ts";
import type { Operator } from "../core/operator.ts";
import { checkDistinct, devSettings, exampleFiles, exampleLeftOut, exampleSamples, loadOperatorWithInputs, operatorFiles } from "./operators.ts";
import { startPipeline, type ReconcileRecord } from "./local/pipeline.ts";
import { devEventKey } from "./local/event-key.ts";
import { devProject } from "./local/dev-project.ts";
import { untilSignal } from "./signals.ts";
import { defaultKubeconfig } from "./environment.ts";
import { watchOperators } from "./local/watch.ts";
import { writeTraceState } from "./trace-page/state.ts";
import { startTracePage } from "./trace-page/page.ts";
import { startJaeger, type LocalJaeger } from "../emulator/jaeger.ts";

const formatSeconds = (s: number): string => (s < 10 ? `${s.toFixed(1)}s` : `${Math.round(s)}s`);

/** One readable line per reconcile: what, how it ended, how long it took. */
export function reconcileLine(r: ReconcileRecord): string {
  const what = `${r.kind} ${r.name}`;
  const ms = `${Math.round(r.latencyMs)} ms`;
  const where = `${r.namespace ? `ns ${r.namespace}, ` : ""}${r.outcome.apiCalls} API calls${r.reason ? `, ${r.reason}` : ""}`;
  switch (r.outcome.result) {
    case "success":
      return `✔ ${what} reconciled in ${ms} (${where})`;
    case "retry-later":
      return `↻ ${what} not reconciled yet, again in ${formatSeconds(r.outcome.delaySeconds)}: ${r.outcome.detail} (${ms})`;
    case "permanent":
      return `✖ ${what} not reconciled: ${r.outcome.detail} (${ms}; fix the object to retry)`;
    case "retry":
      // The local queues dead-letter a message on the receive after their limit (emulator/queues.ts).
      return (r.receiveCount ?? 1) >= MAX_RECEIVE_COUNT
        ? `☠ ${what} failed and could not record why on the object; receive ${r.receiveCount ?? "?"} of ${MAX_RECEIVE_COUNT}: the message goes to the dead-letter queue (crdfn dlq list): ${r.outcome.detail} (${ms})`
        : `! ${what} failed and could not record why on the object; the queue redelivers the message (receive ${r.receiveCount ?? 1} of ${MAX_RECEIVE_COUNT}): ${r.outcome.detail} (${ms})`;
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

interface DevOptions {
  stateDir: string;
  operator?: string[];
  examples?: boolean;
  apply?: string[];
  samples: boolean;
  kind?: boolean;
  kubeconfig?: string;
  context?: string;
  installCrds: boolean;
  watch?: boolean;
  logLevel: string;
  identities: boolean;
  namespace?: string[];
  project?: string;
  target: string;
  trace?: boolean;
}

const TARGETS: readonly FunctionTarget[] = ["lambda", "cloudrun"];

/** The Cloud Run target's lines in `.crdfn/env`: which operators' Pub/Sub resources `crdfn status` and `crdfn dlq` look at. */
function pubSubTarget(operators: ReadonlyArray<Operator<unknown>>): PubSubTargetOptions {
  return { env: { CRDFN_PUBSUB_PREFIX: LOCAL_PUBSUB_PREFIX, CRDFN_PUBSUB_OPERATORS: operators.map(operatorName).join(",") } };
}

/** The cluster the options name: kind's, a kubeconfig's, else a control plane started here. */
function target(o: DevOptions, say: (line: string) => void, pubsub: PubSubTargetOptions | undefined, jaeger: LocalJaeger | undefined): Promise<DevTarget> {
  if (o.kind && (o.kubeconfig || o.context)) throw new SetupError("--kind names the kind cluster itself: leave out --kubeconfig and --context");
  const queue = pubsub ? { pubsub } : {};
  // Another cluster's API server has a tracing configuration of its own (or none), not ours.
  if (jaeger && (o.kind || o.kubeconfig || o.context))
    say(
      `  the existing cluster's API server is not pointed at the trace viewer: its spans show only if its own tracing configuration exports to ${jaeger.otlpGrpc}`,
    );
  if (o.kind) return existingTarget({ kubeconfig: kindKubeconfig(o.stateDir), context: KIND_CONTEXT, stateDir: o.stateDir, say, ...queue });
  if (o.kubeconfig || o.context)
    return existingTarget({
      kubeconfig: o.kubeconfig ?? defaultKubeconfig(),
      ...(o.context ? { context: o.context } : {}),
      stateDir: o.stateDir,
      say,
      ...queue,
    });
  if (!o.installCrds) throw new SetupError("--no-install-crds applies to an existing cluster (--kubeconfig); the embedded one starts empty");
  return startedTarget(o.stateDir, say, pubsub, jaeger ? { tracingEndpoint: jaeger.otlpGrpc } : {});
}

const DEV_EXAMPLES =
  "\nExamples:\n  $ crdfn dev                                          # the examples of a crdfn checkout\n" +
  "  $ crdfn dev --operator operator.ts --apply sample.yaml  # your operator and its sample object\n" +
  "  $ crdfn dev --target cloudrun                        # Pub/Sub and functions-framework, as on Cloud Run functions\n" +
  "  $ crdfn dev --trace                                  # and a trace page: where each change's time went";

/** The target, and with --trace the viewer first: kube-apiserver is started pointing at it. */
async function tracedTarget(
  o: DevOptions,
  say: (line: string) => void,
  pubsub: PubSubTargetOptions | undefined,
): Promise<{ env: DevTarget; jaeger: LocalJaeger | undefined }> {
  const jaeger = o.trace ? await startJaeger({ log: say }) : undefined;
  try {
    return { env: await target(o, say, pubsub, jaeger), jaeger };
  } catch (e) {
    await jaeger?.stop();
    throw e;
  }
}

/** The trace page over the viewer, named in the state dir for `crdfn trace` while it runs; returns its stop. */
async function serveTracePage(stateDir: string, jaeger: LocalJaeger, say: (line: string) => void): Promise<() => Promise<void>> {
  const page = await startTracePage(jaeger.query);
  const forget = writeTraceState(stateDir, { page: page.url, query: jaeger.query, otlpHttp: jaeger.otlpHttp, otlpGrpc: jaeger.otlpGrpc });
  say(`  traces: ${page.url} (or: crdfn trace greeting/hello-world); Jaeger's query API at ${jaeger.query}`);
  return async () => {
    forget();
    await page.stop();
  };
}

export function devCommand(): Command {
  return new Command("dev")
    .description(
      "run the local emulator end to end: control plane, ElasticMQ, the bridge, the example operators' functions " +
        "and the local poller (--target cloudrun: the Pub/Sub emulator, push, a functions-framework server per operator); " +
        "apply the sample Greeting and CronTab; print a line per reconcile. Ctrl-C stops everything",
    )
    .option("--state-dir <dir>", "where to write kubeconfig and env", ".crdfn")
    .option("--operator <file...>", "run your operator module(s) (default export defineOperator({...})) instead of the examples")
    .option("--examples", "with --operator: run the example operators too")
    .option("--apply <file...>", "after start-up, server-side apply these YAML files (your sample objects)")
    .option("--no-samples", "do not apply the examples' sample objects")
    .option("--kubeconfig <file>", "run against this existing cluster instead of starting one; Ctrl-C leaves it untouched")
    .option("--context <name>", "the kubeconfig context to use (default: its current context)")
    .option("--no-install-crds", "with --kubeconfig: do not apply the operators' CRDs (they are installed already)")
    .option("--kind", `run against the kind cluster "${KIND_CLUSTER}" (needs Docker and kind; see infra/kind/)`)
    .option("--watch", "reload an operator when its file (or one it imports) changes, without restarting anything else")
    .option("--namespace <ns...>", "the namespaces the operators serve (default: namespaces: in ./crdfn.deploy.yaml, else default)")
    .option(
      "--project <name>",
      "names the dev bridge's identity crdfn-bridge-<name>, so projects in dev on one cluster keep each their own (default: project: in crdfn.deploy.yaml, else package.json's name)",
    )
    .option("--no-identities", "run the functions and the bridge as the kubeconfig's user, not as deployed (their generated identities and admission policies)")
    .option(
      "--target <target>",
      "where the functions run, as deployed: lambda (SQS FIFO, the poller as Lambda's event source) or cloudrun (Pub/Sub ordering keys, push to functions-framework)",
      "lambda",
    )
    .option(
      "--trace",
      "trace every change (the bridge, the functions and kube-apiserver export to a local Jaeger, built from the Go module proxy on first use: minutes) and serve a trace page; `crdfn trace KIND/NAME` prints one in the terminal",
    )
    .option("--log-level <level>", "bridge and function log level (pino JSON on stderr)", "warn")
    .addHelpText("after", DEV_EXAMPLES)
    .action(async (o: DevOptions) => {
      refuseClusterRegistry();
      if (!TARGETS.includes(o.target as FunctionTarget)) throw new SetupError(`--target ${o.target}: must be ${TARGETS.join(" or ")}`);
      const say = (line: string) => console.log(line);
      // The project's deploy settings, validated as `crdfn generate` validates them, before anything loads or starts.
      const settings = devSettings();
      const examples = exampleFiles();
      const loaded = (
        await Promise.all(operatorFiles(o.operator, o.examples === true).map(async (file) => ({ file, ...(await loadOperatorWithInputs(file)) })))
      ).filter((l) => {
        const why = examples.includes(l.file) ? exampleLeftOut(l.operator, o.target) : undefined;
        if (why) say(why);
        return why === undefined;
      });
      const files = loaded.map((l) => l.file);
      const operators = loaded.map((l) => l.operator);
      checkDistinct(operators);
      // A schema with no CRD form is refused here, not after the control plane has started.
      for (const op of operators) crdOf(op);
      const namespaces = o.namespace ?? (settings?.namespaces.length ? settings.namespaces : ["default"]);
      // Resolved before anything starts: a bad name is refused at once.
      const project = devProject(process.cwd(), o.project).project;
      const examplesRunning = !o.operator || o.examples === true;
      const t0 = Date.now();
      const cloudRun = o.target === "cloudrun";
      const { env, jaeger } = await tracedTarget(o, say, cloudRun ? pubSubTarget(operators) : undefined);
      const stopAll: Array<() => Promise<void>> = [() => env.stop()];
      if (jaeger) stopAll.push(() => jaeger.stop());
      try {
        const logger = pino({ level: o.logLevel }, pino.destination(2));
        const pipeline = await startPipeline({
          cluster: env.cluster,
          ...(env.pubsub ? { pubsub: env.pubsub } : { ...(env.queue ? { queue: env.queue } : {}) }),
          installCrds: o.installCrds,
          operators,
          logger,
          functionLogLevel: o.logLevel,
          onReconcile: (r) => say(reconcileLine(r)),
          log: say,
          identities: o.identities ? { namespaces, project, stateDir: o.stateDir } : false,
          eventKey: devEventKey(o.stateDir),
          ...(jaeger ? { tracing: { otlpEndpoint: jaeger.otlpHttp } } : {}),
        });
        stopAll.unshift(() => pipeline.stop());
        if (o.watch) {
          const watching = watchOperators({ loaded, apply: (next) => pipeline.reload(next), say });
          stopAll.unshift(() => Promise.resolve(watching.close()));
        }
        say(
          `crdfn dev ready in ${((Date.now() - t0) / 1000).toFixed(1)}s — operators: ${operators.map((op) => op.resource.kind).join(", ")}${cloudRun ? " (Cloud Run target: Pub/Sub emulator, push, functions-framework)" : ""}`,
        );
        say(`  kubectl --kubeconfig ${env.files.kubeconfig} get ${operators.map((op) => op.resource.plural).join(",")}`);
        say(`  environment for other tools: set -a; . ${env.files.env}; set +a`);
        if (o.watch) say(`  watching ${files.length} operator module(s) for changes`);
        // Stopped before the viewer, whose traces go with it.
        if (jaeger) stopAll.splice(stopAll.length - 1, 0, await serveTracePage(o.stateDir, jaeger, say));
        say(env.ownsCluster ? `  Ctrl-C stops everything.` : `  Ctrl-C stops crdfn dev; the cluster and its objects stay.`);
        // An existing cluster gets nothing but the CRDs and what --apply names.
        const toApply = [...(o.samples && examplesRunning && env.ownsCluster ? exampleSamples(files) : []), ...(o.apply ?? [])];
        if (toApply.length > 0) {
          const applied = await applyFiles(KubernetesObjectApi.makeApiClient(env.cluster.kubeConfig), toApply);
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
