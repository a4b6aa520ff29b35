// `crdfn diff`: what the operator's code on disk would change across the live objects, before it
// ships. Each object is reconciled here by the function's own steps (local-reconcile.ts) through an
// API whose writes are server-side dry runs, so a child's diff is against what the API server
// would store (its defaults, other managers' fields and admission included) and nothing is
// written. Like `kubectl diff`: exit 1 when anything would change (or fail), 0 when nothing.
import { positiveInteger } from "../flags.ts";
import { join } from "node:path";
import { Command } from "commander";
import pino, { type Logger } from "pino";
import type { Operator } from "../../core/operator.ts";
import { findCondition, type Condition } from "../../core/conditions.ts";
import { loadKubeconfig } from "../../clients/kubeconfig.ts";
import { createKubeApi } from "../../functions/runtime/kube-api-http.ts";
import type { KubeApi, KubeObject } from "../../functions/runtime/kube-api.ts";
import { APPLIED_HASH_ANNOTATION } from "../../core/event.ts";
import { SetupError } from "../../emulator/errors.ts";
import { formatChange, isWithin, leafChanges, type FieldChange } from "./field-diff.ts";
import { listTargets, reconcileLocally, type LocalRun, type RecordedWrite } from "./local-reconcile.ts";
import { DEFAULT_SETTINGS, projectOperators, selectOperators } from "../operators.ts";
import { adminEnv } from "../environment.ts";

export interface ChildChange {
  what: "changed" | "created" | "pruned";
  /** `Kind namespace/name`. */
  child: string;
  fields: FieldChange[];
}

export interface ObjectDiff {
  /** `Kind namespace/name`. */
  object: string;
  children: ChildChange[];
  status: FieldChange[];
  /** The object's own metadata (a finalizer added). */
  metadata: FieldChange[];
  /** Why its reconcile would fail, in one line. */
  failure?: string;
  /** It declares effects, which diff does not run. */
  effects: boolean;
  /** Being deleted: its finalize would run, which diff does not. */
  deleting: boolean;
  /** Fields left out because they follow the reconcile's clock (`status.lastTick`): see clockRun. */
  clockFields: string[];
}

export interface DiffOptions {
  operators: ReadonlyArray<Operator<unknown>>;
  /** A dry-run API: `createKubeApi(access, { dryRun: true })`. */
  api: KubeApi;
  logger: Logger;
  clock: () => Date;
  namespace?: string;
  /** Only this kind (kind, plural or singular, any case), and of it only `name`. */
  kind?: string;
  name?: string;
  /** Objects reconciled at once. Default 8. */
  concurrency?: number;
}

const matches = (op: Operator<unknown>, kind: string): boolean => {
  const k = kind.toLowerCase();
  const r = op.resource;
  return [r.kind, r.plural, r.singular, `${r.plural}.${r.group}`].some((n) => n?.toLowerCase() === k);
};

/** Reconciles every selected object once, dry run, and says what each would change. */
export async function diffObjects(opts: DiffOptions): Promise<ObjectDiff[]> {
  const operators = opts.kind === undefined ? opts.operators : opts.operators.filter((op) => matches(op, opts.kind!));
  if (operators.length === 0)
    throw new SetupError(`no operator given manages ${opts.kind}: kinds here are ${opts.operators.map((o) => o.resource.kind).join(", ")}`);
  const work: Array<{ op: Operator<unknown>; object: KubeObject }> = [];
  for (const op of operators) {
    const objects = await listTargets(opts.api, op, opts.namespace);
    for (const object of objects) if (opts.name === undefined || object.metadata.name === opts.name) work.push({ op, object });
  }
  if (opts.name !== undefined && work.length === 0)
    throw new SetupError(`${opts.kind}/${opts.name}: not found${opts.namespace ? ` in namespace ${opts.namespace}` : ""}`);
  const out: ObjectDiff[] = [];
  let next = 0;
  const worker = async () => {
    for (let i = next++; i < work.length; i = next++) {
      const { op, object } = work[i]!;
      // Being deleted: what would run is finalize, I/O outside the cluster that no dry run shows.
      if (object.metadata.deletionTimestamp !== undefined) {
        out[i] = { object: named(object, op.resource.kind), children: [], status: [], metadata: [], effects: false, deleting: true, clockFields: [] };
        continue;
      }
      const local = (clock: () => Date) => reconcileLocally(op, object, { api: opts.api, logger: opts.logger, clock, cluster: "diff" });
      const run = await local(opts.clock);
      const first = objectDiff(op, object, run);
      // The status would change: is it only what follows ctx.now? The same code run at another
      // time tells (a time it writes differs between the runs; nothing else does). Children are
      // not asked about: a changed child is what a diff is for, and a second dry run each would
      // double the cost of a changed operator's diff.
      const stamped = first.failure === undefined && (first.status.length > 0 || first.metadata.length > 0);
      out[i] = stamped ? objectDiff(op, object, run, await local(() => new Date(opts.clock().getTime() + CLOCK_SHIFT_MS))) : first;
    }
  };
  await Promise.all(Array.from({ length: Math.min(opts.concurrency ?? 8, work.length) }, worker));
  return out;
}

const named = (o: { kind?: string; metadata?: { namespace?: string; name?: string } } | undefined, fallback: string): string =>
  `${o?.kind ?? fallback} ${o?.metadata?.namespace ? `${o.metadata.namespace}/` : ""}${o?.metadata?.name ?? ""}`;

/** What the API server keeps per write (versions, times, managers) and crdfn's content hash: not a change anyone made. */
function content(o: KubeObject | undefined): unknown {
  if (o === undefined) return undefined;
  const { managedFields: _m, resourceVersion: _r, generation: _g, creationTimestamp: _c, uid: _u, annotations, ...metadata } = o.metadata;
  const { [APPLIED_HASH_ANNOTATION]: _h, ...kept } = (annotations ?? {}) as Record<string, string>;
  const { status: _s, ...rest } = o;
  return { ...rest, metadata: { ...metadata, ...(Object.keys(kept).length > 0 ? { annotations: kept } : {}) } };
}

/** The status as a person reads it: without the runtime's schedule, its reconciled record and the conditions' times. */
function readable(status: unknown): unknown {
  if (typeof status !== "object" || status === null) return status;
  const { nextReconcile: _n, reconciled: _r, conditions, ...fields } = status as Record<string, unknown>;
  const conds = (conditions as Condition[] | undefined)?.map(({ lastTransitionTime: _t, ...c }) => c);
  return { ...fields, ...(conds ? { conditions: conds } : {}) };
}

function failureOf(run: LocalRun, writes: readonly RecordedWrite[]): string | undefined {
  if (run.outcome.result === "success") return undefined;
  const recorded = writes.filter((w) => w.verb === "status").at(-1)?.after?.status as { conditions?: Condition[] } | undefined;
  const ready = findCondition(recorded?.conditions, "Ready");
  return ready?.status === "False" ? `${ready.reason}: ${ready.message}` : `${run.outcome.result}: ${run.outcome.detail ?? ""}`;
}

/**
 * How much later the second run's clock is: a day, an hour, a minute, a second and a millisecond,
 * so that a time written at any of those precisions (a date, an ISO time, epoch seconds) differs.
 */
const CLOCK_SHIFT_MS = 86_400_000 + 3_600_000 + 60_000 + 1000 + 1;

/** What a write is compared by: its status as a person reads it, or the object's content. */
const viewOf = (w: RecordedWrite, o: KubeObject | undefined): unknown => (w.verb === "status" ? readable(o?.status) : content(o));

/** The same write in another run of the same code: same verb, kind and object. */
const sameWrite = (a: RecordedWrite, b: RecordedWrite): boolean =>
  a.verb === b.verb &&
  a.ref.plural === b.ref.plural &&
  a.ref.namespace === b.ref.namespace &&
  (a.after?.metadata.name ?? a.ref.name) === (b.after?.metadata.name ?? b.ref.name);

/**
 * What `run` would change on `object`. `clockRun`: the same code run with a later clock; a status
 * or metadata field whose value differs between the two runs follows ctx.now (`lastTick:
 * ctx.now.toISOString()`) and is left out (named in `clockFields`), since any code, the deployed
 * one too, would write it.
 */
export function objectDiff(op: Operator<unknown>, object: KubeObject, run: LocalRun, clockRun?: LocalRun): ObjectDiff {
  const failure = failureOf(run, run.writes);
  const children: ChildChange[] = [];
  const status: FieldChange[] = [];
  const metadata: FieldChange[] = [];
  const clockFields: string[] = [];
  for (const w of run.writes) {
    const other = w.verb === "apply" ? undefined : clockRun?.writes.find((x) => sameWrite(w, x));
    const clocked = other === undefined ? [] : leafChanges(viewOf(w, w.after), viewOf(other, other.after)).map((c) => c.path);
    const changed = (where: string): FieldChange[] => {
      const all = leafChanges(viewOf(w, w.live), viewOf(w, w.after));
      const kept = all.filter((c) => !clocked.some((p) => isWithin(c.path, p)));
      for (const c of all) if (!kept.includes(c)) clockFields.push(`${where}${c.path}`);
      return kept;
    };
    if (w.verb === "apply") {
      if (w.live === undefined) children.push({ what: "created", child: named(w.after, w.ref.plural), fields: [] });
      else {
        const fields = changed(`${w.after?.kind ?? w.ref.plural} `);
        if (fields.length > 0) children.push({ what: "changed", child: named(w.after, w.ref.plural), fields });
      }
    } else if (w.verb === "delete") {
      children.push({ what: "pruned", child: named(w.live, w.ref.plural), fields: [] });
    } else if (w.verb === "status" && failure === undefined) {
      status.push(...changed("status."));
    } else if (w.verb === "patch" && w.ref.plural === op.resource.plural) {
      metadata.push(...changed(""));
    }
  }
  return {
    object: named(object, op.resource.kind),
    children,
    status,
    metadata,
    ...(failure === undefined ? {} : { failure }),
    effects: run.effectsSkipped,
    deleting: false,
    clockFields: [...new Set(clockFields)],
  };
}

const changes = (d: ObjectDiff): boolean => d.children.length > 0 || d.status.length > 0 || d.metadata.length > 0 || d.failure !== undefined;

/** A field of `under` as one line: `status.lastTick: …` (the whole of it, when its path is empty). */
const fieldLine = (under: string, f: FieldChange): string => (f.path === "" ? `${under}${formatChange(f).slice(2)}` : `${under}.${formatChange(f)}`);

/** The report: one block per object that would change or fail, and a summary line. */
export function formatDiffs(diffs: readonly ObjectDiff[]): { lines: string[]; changed: boolean } {
  const lines: string[] = [];
  for (const d of diffs.filter(changes)) {
    lines.push(d.object);
    if (d.failure !== undefined) lines.push(`  ! would fail: ${d.failure}`);
    for (const f of d.metadata) lines.push(`  ~ ${fieldLine("metadata", f)}`);
    for (const c of d.children) {
      lines.push(`  ${c.what === "created" ? "+" : c.what === "pruned" ? "-" : "~"} ${c.child}${c.what === "changed" ? "" : ` (${c.what})`}`);
      if (c.what === "changed") for (const f of c.fields) lines.push(`      ${formatChange(f)}`);
    }
    for (const f of d.status) lines.push(`  ~ ${fieldLine("status", f)}`);
    if (d.effects) lines.push("  effects: would run (diff never runs them; the status they recorded last stood in)");
  }
  const changed = diffs.filter(changes);
  const count = (what: ChildChange["what"]) => diffs.reduce((n, d) => n + d.children.filter((c) => c.what === what).length, 0);
  const failing = diffs.filter((d) => d.failure !== undefined).length;
  const withEffects = diffs.filter((d) => d.effects).length;
  const deleting = diffs.filter((d) => d.deleting).length;
  const clocked = [...new Set(diffs.flatMap((d) => d.clockFields))];
  lines.push(
    `${diffs.length} object(s): ${changed.length - failing} would change (${count("changed")} child(ren) changed, ${count("created")} created, ${count("pruned")} pruned, ${diffs.filter((d) => d.status.length > 0).length} status(es)), ${failing} would fail, ${diffs.length - changed.length} unchanged` +
      (withEffects > 0 ? `; ${withEffects} would run effects (not run here)` : "") +
      (deleting > 0 ? `; ${deleting} being deleted (their finalize not run here)` : "") +
      (clocked.length > 0
        ? `; not compared, as they follow ctx.now: ${clocked.slice(0, 3).join(", ")}${clocked.length > 3 ? ` and ${clocked.length - 3} more` : ""}`
        : ""),
  );
  return { lines, changed: changed.length > 0 };
}

export function diffCommand(): Command {
  return new Command("diff")
    .description("show what your operator's code on disk would change across the live objects (server-side dry run: writes nothing, never runs effects)")
    .argument("[target]", "a kind (Kind, plural or singular) or kind/name; default every object of every operator")
    .option("--operator <file...>", "your operator module(s) (default: those ./crdfn.deploy.yaml lists, else this checkout's examples)")
    .option("-n, --namespace <ns>", "only this namespace (default: all the operator's objects)")
    .option("--kubeconfig <file>", "kubeconfig (default: KUBECONFIG, .crdfn/env, ~/.kube/config)")
    .option("--context <name>", "kubeconfig context")
    .option("--concurrency <n>", "objects reconciled at once", "8")
    .option("--state-dir <dir>", "where crdfn dev wrote its env", ".crdfn")
    .addHelpText(
      "after",
      "\nExit status: 0 nothing would change, 1 something would change or fail, 2 a setup error (like kubectl diff).\n" +
        "Needs: get/list on the operator's kind, its owned and referenced kinds; and the write verbs the function\n" +
        "has (patch and create on children, update on status, delete), since a dry run is authorized as the write it stands for.\n" +
        "\nExamples:\n  $ crdfn diff --operator operator.ts                 # every object, every namespace\n" +
        "  $ crdfn diff greeting/hello -n default --operator operator.ts\n" +
        "  $ crdfn diff --operator operator.ts && serverless deploy   # deploy only what changes nothing",
    )
    .action(
      async (
        target: string | undefined,
        opts: { operator?: string[]; namespace?: string; kubeconfig?: string; context?: string; concurrency: string; stateDir: string },
      ) => {
        const concurrency = positiveInteger("--concurrency", opts.concurrency);
        const [kind, name] = target === undefined ? [] : target.split("/", 2);
        const env = adminEnv(opts.stateDir);
        // Named in the one line that refuses a missing or unreadable kubeconfig.
        const from =
          opts.kubeconfig !== undefined
            ? "--kubeconfig"
            : process.env.KUBECONFIG
              ? "KUBECONFIG"
              : env.KUBECONFIG
                ? `KUBECONFIG in ${join(opts.stateDir, "env")}`
                : undefined;
        const { kubeConfig } = loadKubeconfig(opts.kubeconfig ?? env.KUBECONFIG, opts.context, env, from);
        const operators = opts.operator?.length ? await selectOperators(opts.operator, false) : await projectOperators(DEFAULT_SETTINGS);
        const started = Date.now();
        const diffs = await diffObjects({
          operators,
          api: createKubeApi({ connection: kubeConfig }, { dryRun: true }),
          logger: pino({ level: process.env.LOG_LEVEL ?? "silent" }, pino.destination(2)),
          clock: () => new Date(),
          ...(opts.namespace ? { namespace: opts.namespace } : {}),
          ...(kind ? { kind } : {}),
          ...(name ? { name } : {}),
          concurrency,
        });
        const { lines, changed } = formatDiffs(diffs);
        console.log(`${lines.join("\n")} (${((Date.now() - started) / 1000).toFixed(1)} s)`);
        process.exitCode = changed ? 1 : 0;
      },
    );
}
