// `crdfn replay`: one reconcile rerun here, in the foreground, so a debugger (`node --inspect`),
// breakpoints and console.log work on the code on disk: for a dead letter (SQS or Pub/Sub) or an
// object. It prints the inputs reconcile was given, the outcome, a throw's stack (through the
// operator's source map) and what the reconcile would write. A dry run by default (server-side
// dry run, effects and finalize not run); `--apply` writes as the function would and, for a dead
// letter, removes it from the dead-letter queue once its object is reconciled. A dead letter's MAC
// and cluster are checked first (letter-proof.ts): `--apply` refuses one not proven to come from
// the bridge unless told `--unverified`.
import { Command } from "commander";
import pino from "pino";
import { stringify } from "yaml";
import { operatorResource } from "../../core/event-auth.ts";
import type { Operator } from "../../core/operator.ts";
import { parseKeyEvent, type KeyEvent } from "../../core/event.ts";
import { loadKubeconfig } from "../../clients/kubeconfig.ts";
import { createKubeApi } from "../../functions/runtime/kube-api-http.ts";
import { thrownMessage } from "../../functions/runtime/user-code.ts";
import { SetupError } from "../../emulator/errors.ts";
import { adminTarget, type AdminTarget } from "./admin-target.ts";
import { formatDiffs, objectDiff } from "./diff.ts";
import { holdSqsDeadLetter } from "./dlq.ts";
import { proveLetter } from "./letter-proof.ts";
import { reconcileLocally, type LocalRun } from "./local-reconcile.ts";
import { pubSubAdmin } from "./pubsub-admin.ts";
import { DEFAULT_SETTINGS, projectOperators, selectOperators } from "../operators.ts";
import { adminEnv } from "../environment.ts";

/** A dead letter taken off its queue for the replay; handed back unless the replay removes it. */
export interface HeldLetter {
  id: string;
  event: KeyEvent;
  /** The body as it sits in the queue: what its MAC is checked on. */
  body: string;
  remove: () => Promise<void>;
  release: () => Promise<void>;
}

/** Finds the dead letter `id` in any operator's dead-letter queue (or subscription) of `t`. */
export async function holdDeadLetter(t: AdminTarget, id: string): Promise<HeldLetter> {
  const held = await findLetter(t, id);
  if (held === undefined)
    throw new SetupError(
      `--dead-letter ${id}: no such message in ${t.from}'s dead-letter ${t.pubsub ? "subscriptions" : "queues"} (crdfn dlq list shows their ids)`,
    );
  const parsed = parseKeyEvent(held.body);
  if (!parsed.ok) {
    await held.release();
    throw new SetupError(`--dead-letter ${id}: not a key event (${parsed.error.slice(0, 160)}): nothing to replay; it can only be deleted`);
  }
  return { id, event: parsed.event, body: held.body, remove: held.remove, release: held.release };
}

async function findLetter(t: AdminTarget, id: string): Promise<{ body: string; remove: () => Promise<void>; release: () => Promise<void> } | undefined> {
  if (t.pubsub) {
    const admin = await pubSubAdmin(t.pubsub.connection);
    for (const { names } of t.pubsub.pairs) {
      const held = await admin.hold(names.deadLetterSubscription, id);
      if (held !== undefined) {
        const done = (f: () => Promise<void>) => async () => {
          try {
            await f();
          } finally {
            await admin.close();
          }
        };
        return { body: held.body, remove: done(held.remove), release: done(held.release) };
      }
    }
    await admin.close();
    return undefined;
  }
  for (const { deadLetters } of t.pairs) {
    const held = await holdSqsDeadLetter(t.sqs!, deadLetters, id);
    if (held !== undefined) return held;
  }
  return undefined;
}

/** What a person reads: the inputs, the outcome, a throw's stack, the writes. */
export function describeRun(op: Operator<unknown>, object: { metadata: { name: string; namespace?: string } }, run: LocalRun, applied: boolean): string[] {
  const lines: string[] = [];
  const call = run.call;
  if (call !== undefined) {
    lines.push("reconcile was given:", indent(yamlOf({ object: withoutManagedFields(call.object), children: call.children, references: call.references })));
    if (call.thrown !== undefined) lines.push("reconcile threw:", indent(call.thrown instanceof Error ? userFrames(call.thrown) : thrownMessage(call.thrown)));
    else if (call.result !== undefined) lines.push("reconcile returned:", indent(yamlOf(call.result)));
  } else {
    lines.push("reconcile was not called (the object is being deleted, or its spec was refused first)");
  }
  lines.push(`outcome: ${run.outcome.result}${run.outcome.detail ? ` (${run.outcome.detail})` : ""}`);
  const { lines: diff } = formatDiffs([objectDiff(op, { apiVersion: "", kind: op.resource.kind, metadata: object.metadata }, run)]);
  // Its own summary line counts objects; here there is one.
  lines.push(applied ? "written:" : "would write (dry run; --apply writes):", ...diff.slice(0, -1).map((l) => `  ${l}`));
  if (run.effectsSkipped) lines.push("effects were not run (a dry run never runs them; --apply does)");
  return lines;
}

/** The stack down to the user's code: the frames below it are crdfn's own, the same for every replay. */
function userFrames(e: Error): string {
  const lines = (e.stack ?? e.message).split("\n");
  const ours = lines.findIndex((l) => /[/\\]local-reconcile\.[jt]s:/.test(l));
  return (ours > 0 ? lines.slice(0, ours) : lines).join("\n");
}

const withoutManagedFields = (o: unknown): unknown => {
  const x = o as { metadata?: Record<string, unknown> } | undefined;
  if (x?.metadata === undefined) return o;
  const { managedFields: _m, ...metadata } = x.metadata;
  return { ...x, metadata };
};

/** As YAML, as JSON would carry it (what a function value or a Date would be on the wire). */
const yamlOf = (value: unknown): string => stringify(JSON.parse(JSON.stringify(value ?? null)) as unknown);

const indent = (text: string): string =>
  text
    .trimEnd()
    .split("\n")
    .map((l) => `    ${l}`)
    .join("\n");

/**
 * A dead letter proven to come from the bridge goes on; one that is not is refused under --apply
 * (SetupError: one line, exit 2, before anything is written) unless --unverified, and said so.
 */
function checkLetter(
  letter: HeldLetter,
  op: Operator<unknown>,
  env: NodeJS.ProcessEnv,
  opts: { apply?: boolean; unverified?: boolean; stateDir: string; cluster?: string; eventKeys?: string },
): void {
  const proof = proveLetter(letter.body, operatorResource(op.resource), {
    env,
    stateDir: opts.stateDir,
    ...(opts.cluster ? { cluster: opts.cluster } : {}),
    ...(opts.eventKeys ? { eventKeysFile: opts.eventKeys } : {}),
  });
  if (proof.ok) console.log(`dead letter ${letter.id}: verified: ${proof.how}`);
  else if (opts.apply && !opts.unverified)
    throw new SetupError(
      `--dead-letter ${letter.id}: refused: not proven to come from the bridge (${proof.why}); nothing written (--apply --unverified replays it anyway)`,
    );
  else
    console.error(
      `crdfn: dead letter ${letter.id} is NOT verified (${proof.why})${opts.apply ? ": replayed, as --unverified says" : ": a dry run only; --apply refuses it unless --unverified"}`,
    );
}

export function replayCommand(): Command {
  return new Command("replay")
    .description("rerun one reconcile here, in the foreground (debugger, breakpoints, console.log), from a dead letter or an object")
    .argument("[object]", "kind/name of the object to reconcile (or use --dead-letter)")
    .option("--dead-letter <id>", "the dead letter to replay (its id from crdfn dlq list)")
    .option("--operator <file...>", "your operator module(s) (default: those the deploy settings list, else this checkout's examples)")
    .option("-n, --namespace <ns>", "the object's namespace", "default")
    .option(
      "--apply",
      "write as the function would (default: a server-side dry run that writes nothing); a dead letter is removed once its object is reconciled",
    )
    .option("--kubeconfig <file>", "kubeconfig (default: KUBECONFIG, .crdfn/env, ~/.kube/config)")
    .option("--context <name>", "kubeconfig context")
    .option("--settings <file>", "a deployment's deploy settings: where its dead-letter queues are")
    .option("--state-dir <dir>", "where crdfn dev wrote its env", ".crdfn")
    .option("--cluster <id>", "the cluster id a dead letter must name (default: CRDFN_CLUSTER, else default)")
    .option(
      "--event-keys <file>",
      "the operator's event keys, as CRDFN_EVENT_KEYS spells them, to check a dead letter's MAC with (default: CRDFN_EVENT_KEYS, else CRDFN_EVENT_KEY's cluster key, else crdfn dev's)",
    )
    .option("--unverified", "with --apply: replay a dead letter whose MAC or cluster does not verify (default: refused, nothing written)")
    .addHelpText(
      "after",
      "\nExit status: 0 the reconcile succeeded, 1 it did not, 2 a setup error or an unverified dead letter refused.\n" +
        "\nExamples:\n  $ crdfn replay --dead-letter 8c1f…e2 --operator operator.ts       # see it fail, with the stack\n" +
        "  $ node --inspect-brk node_modules/.bin/crdfn replay greeting/hello --operator operator.ts\n" +
        "  $ crdfn replay --dead-letter 8c1f…e2 --operator operator.ts --apply   # after the fix: reconcile, remove it",
    )
    .action(
      async (
        target: string | undefined,
        opts: {
          deadLetter?: string;
          operator?: string[];
          namespace: string;
          apply?: boolean;
          kubeconfig?: string;
          context?: string;
          settings?: string;
          stateDir: string;
          cluster?: string;
          eventKeys?: string;
          unverified?: boolean;
        },
      ) => {
        if ((target === undefined) === (opts.deadLetter === undefined)) throw new SetupError("name one object (kind/name) or one --dead-letter <id>");
        // Stacks point into the operator's own source, not the bundle it was loaded from.
        process.setSourceMapsEnabled(true);
        const env = adminEnv(opts.stateDir);
        const t =
          opts.deadLetter === undefined ? undefined : await adminTarget({ stateDir: opts.stateDir, ...(opts.settings ? { settings: opts.settings } : {}) });
        const operators = opts.operator?.length ? await selectOperators(opts.operator, false) : (t?.operators ?? (await projectOperators(DEFAULT_SETTINGS)));
        const letter = t === undefined ? undefined : await holdDeadLetter(t, opts.deadLetter!);
        try {
          const [kind, name] = target?.split("/", 2) ?? [];
          const e = letter?.event;
          const op = e
            ? operators.find((o) => o.resource.group === e.group && o.resource.plural === e.plural)
            : operators.find((o) => [o.resource.kind, o.resource.plural, o.resource.singular].some((n) => n?.toLowerCase() === kind?.toLowerCase()));
          if (op === undefined) throw new SetupError(`no operator given manages ${e ? `${e.plural}.${e.group}` : kind}: name it with --operator`);
          if (!e && !name) throw new SetupError(`${target}: name the object as kind/name`);
          if (letter) checkLetter(letter, op, env, opts);
          const object = {
            metadata: e
              ? { name: e.name, ...(e.namespace ? { namespace: e.namespace } : {}) }
              : { name: name!, ...(op.resource.scope === "Cluster" ? {} : { namespace: opts.namespace }) },
          };
          if (letter && e)
            console.log(
              `dead letter ${letter.id}: ${e.kind} ${e.namespace ? `${e.namespace}/` : ""}${e.name} (${e.type}${e.reason ? `/${e.reason}` : ""}, cluster ${e.cluster}, resourceVersion ${e.resourceVersion}); the object is read afresh, as the function reads it`,
            );
          const { kubeConfig } = loadKubeconfig(opts.kubeconfig ?? env.KUBECONFIG, opts.context, env);
          const run = await reconcileLocally(op, object, {
            api: createKubeApi({ connection: kubeConfig }, { dryRun: opts.apply !== true }),
            logger: pino({ level: process.env.LOG_LEVEL ?? "warn" }, pino.destination(2)),
            clock: () => new Date(),
            cluster: e?.cluster ?? "replay",
            env: process.env,
            runEffects: opts.apply === true,
            named: e === undefined,
            ...(e ? { uid: e.uid } : {}),
          });
          console.log(describeRun(op, object, run, opts.apply === true).join("\n"));
          const ok = run.outcome.result === "success";
          if (letter && ok && opts.apply) {
            await letter.remove();
            const gone = run.outcome.result === "success" && run.outcome.earlierIncarnation === true;
            console.log(`dead letter ${letter.id} removed: ${gone ? "its object is gone (deleted and re-created since)" : "its object is reconciled"}`);
          } else if (letter) {
            await letter.release();
          }
          process.exitCode = ok ? 0 : 1;
        } catch (error) {
          await letter?.release();
          throw error;
        } finally {
          t?.sqs?.destroy();
        }
      },
    );
}
