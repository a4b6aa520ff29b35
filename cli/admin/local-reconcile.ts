// One reconcile run here, in the foreground, by the function's own steps (runtime.ts's
// reconcileEvent and everything after it), on an object of a live cluster: what `crdfn diff` and `crdfn replay` are
// made of. The inputs are the ones the function would get — the object read from etcd, its
// children's keys as the bridge's index would name them (one labelled LIST per owned kind, as the
// bridge's watch sees them), the observed children and references read as the function reads
// them — and every write goes through an API whose writes can be dry runs (the API server's own
// defaulting, admission and validation, nothing stored). The writes are recorded with the live
// object they would change, so a caller can show what would move.
import type { Logger } from "pino";
import { apiVersionOf, type ObservedChildren, type Operator, type ReconcileResult, type ReferencedObjects } from "../../core/operator.ts";
import type { ChildKey, KeyEvent } from "../../core/event.ts";
import type { KubeApi, KubeObject, ResourceRef } from "../../functions/runtime/kube-api.ts";
import { reconcileEvent } from "../../functions/runtime/runtime.ts";
import { childKeyOf, listOwnedBy } from "../../functions/runtime/children.ts";
import type { Outcome } from "../../functions/runtime/outcome.ts";
import { parentRef, type EventContext } from "../../functions/runtime/event-context.ts";
import { SetupError } from "../../emulator/errors.ts";
import { ApiError, KubeUnreachable } from "../../clients/kube-errors.ts";

/** One write the reconcile made (or, on a dry-run API, would make), with what it would change. */
export interface RecordedWrite {
  verb: "apply" | "status" | "patch" | "create" | "delete";
  ref: ResourceRef;
  /** The object as it stood before the write (undefined: it does not exist). */
  live: KubeObject | undefined;
  /** What the API server answered (for a dry run, what it would store); undefined for a delete. */
  after: KubeObject | undefined;
}

/** What reconcile was called with and what it did, captured around the user's function. */
export interface ReconcileCall {
  object: unknown;
  children: unknown;
  references: unknown;
  result?: ReconcileResult;
  /** What reconcile threw, as thrown (with its stack). */
  thrown?: unknown;
}

export interface LocalRun {
  outcome: Outcome;
  /** The reconcile call, when it was reached (not for an object being deleted, or a spec refused first). */
  call?: ReconcileCall;
  writes: RecordedWrite[];
  /** The operator declares effects: a dry run did not run them (the status they recorded stands in). */
  effectsSkipped: boolean;
}

export interface LocalRunOptions {
  /** Writes are made through it: a dry-run API (`createKubeApi(access, { dryRun: true })`) writes nothing. */
  api: KubeApi;
  logger: Logger;
  clock: () => Date;
  cluster: string;
  /** The function's environment, for effects and finalize when they run (`--apply`). */
  env?: Readonly<Record<string, string | undefined>>;
  /** Run the operator's effects and finalize (replay --apply); otherwise neither runs (effects are said to be skipped). */
  runEffects?: boolean;
  maxAttempts?: number;
  /**
   * The object was named by the person running the command (`crdfn replay greeting/hello`): its
   * absence is a typo or the wrong namespace, refused as a SetupError. Otherwise (a dead letter's
   * object, one listed a moment ago) it was deleted since: nothing is left to do, a success.
   */
  named?: boolean;
  /**
   * The uid the run is for (a dead letter's): an object of the name with another uid is a later
   * incarnation, and the letter's work went with the one it names: nothing is reconciled.
   */
  uid?: string;
}

/** The objects of an operator's kind: all, in one namespace, or one by name. */
export async function listTargets(api: KubeApi, operator: Operator<unknown>, namespace: string | undefined): Promise<KubeObject[]> {
  const { resource } = operator;
  const ref = {
    group: resource.group,
    version: resource.version,
    plural: resource.plural,
    ...(resource.scope === "Namespaced" && namespace ? { namespace } : {}),
  };
  const items = await firstRead(() => api.list(ref));
  return items.map((o) => ({ ...o, apiVersion: apiVersionOf(resource.group, resource.version), kind: resource.kind }));
}

/** Reconciles `object` (its namespace and name; read afresh) once, as the function would. */
export async function reconcileLocally(
  operator: Operator<unknown>,
  object: { metadata: { name: string; namespace?: string } },
  opts: LocalRunOptions,
): Promise<LocalRun> {
  const writes: RecordedWrite[] = [];
  const api = recording(opts.api, writes);
  const ref = parentRef(operator, { name: object.metadata.name, ...(object.metadata.namespace ? { namespace: object.metadata.namespace } : {}) });
  const read = await firstRead(() => opts.api.get(ref));
  if (read === undefined) {
    if (opts.named === true) throw notFound(operator, object.metadata);
    return { outcome: { result: "success", detail: "object is gone" }, writes, effectsSkipped: false };
  }
  if (opts.uid !== undefined && read.metadata.uid !== opts.uid) {
    const detail = `the letter is for uid ${opts.uid}, an earlier object of this name; the live one is uid ${read.metadata.uid ?? "?"}: nothing to replay`;
    return { outcome: { result: "success", detail, earlierIncarnation: true }, writes, effectsSkipped: false };
  }
  let call: ReconcileCall | undefined;
  const watched: Operator<unknown> = {
    ...operator,
    reconcile: (obj, ctx) => {
      call = { object: obj, children: plainChildren(operator, ctx.children), references: plainReferences(operator, ctx.references) };
      try {
        call.result = operator.reconcile(obj, ctx);
        return call.result;
      } catch (thrown) {
        call.thrown = thrown;
        throw thrown;
      }
    },
  };
  const skipEffects = operator.effects !== undefined && opts.runEffects !== true;
  // Effects and finalize act outside the cluster, where no dry run exists: not run. The status
  // effects recorded last stands in for what they would find; finalize is "not done yet", so an
  // object being deleted keeps its finalizer.
  if (skipEffects) watched.effects = () => Promise.resolve(undefined);
  if (operator.finalize !== undefined && opts.runEffects !== true) watched.finalize = () => ({ done: false });
  const event = await eventFor(opts.api, operator, read, opts.cluster, opts.clock());
  // The event carries the object just read from etcd, as a first delivery's does, so the runtime
  // takes it for its first read instead of reading it again (effects still read: runtime.ts).
  const context: EventContext = { operator: watched, api, clock: opts.clock, log: opts.logger, event, ref, firstDelivery: true, env: opts.env ?? {} };
  const outcome = await reconcileEvent(context, opts.maxAttempts ?? 3);
  return { outcome, ...(call === undefined ? {} : { call }), writes, effectsSkipped: skipEffects };
}

/**
 * A command's first request, where a server that does not answer or refuses the credential is the
 * kubeconfig's problem, not the operator's: one line (a SetupError), not a stack.
 */
async function firstRead<T>(read: () => Promise<T>): Promise<T> {
  try {
    return await read();
  } catch (e) {
    if (e instanceof KubeUnreachable) throw new SetupError(`${e.message}: is the kubeconfig's server up?`);
    if (e instanceof ApiError && (e.code === 401 || e.code === 403))
      throw new SetupError(`the API server refused the kubeconfig's user (${e.code} ${e.reason}): ${e.message.split("\n")[0]}`);
    throw e;
  }
}

/** A named object that is not there, as `crdfn diff` and `crdfn replay` say it. */
export function notFound(operator: Operator<unknown>, m: { name: string; namespace?: string | undefined }): SetupError {
  const kind = operator.resource.kind.toLowerCase();
  return new SetupError(
    m.namespace === undefined
      ? `${kind}/${m.name}: not found`
      : `${kind}/${m.name}: not found in namespace ${m.namespace} (-n names another; kubectl get ${operator.resource.plural} -A lists them)`,
  );
}

/** The observed children as data, by kind (only the kinds marked `observe` are given to reconcile). */
function plainChildren(operator: Operator<unknown>, children: ObservedChildren): Record<string, unknown> {
  return Object.fromEntries(operator.owns.filter((o) => o.observe).map((o) => [o.kind, children.of(o.kind, apiVersionOf(o.group, o.version))]));
}

/** The referenced objects as data, by kind. */
function plainReferences(operator: Operator<unknown>, references: ReferencedObjects): Record<string, unknown> {
  return Object.fromEntries(operator.reads.map((r) => [r.kind, references.of(r.kind, apiVersionOf(r.group, r.version))]));
}

/** The key event the bridge would send for `object`: its name, version and its children's keys. */
async function eventFor(api: KubeApi, operator: Operator<unknown>, object: KubeObject, cluster: string, now: Date): Promise<KeyEvent> {
  const { resource } = operator;
  const m = object.metadata;
  return {
    v: 2,
    cluster,
    group: resource.group,
    version: resource.version,
    plural: resource.plural,
    kind: resource.kind,
    ...(m.namespace ? { namespace: m.namespace } : {}),
    name: m.name,
    uid: m.uid ?? "",
    resourceVersion: m.resourceVersion ?? "",
    generation: m.generation ?? 0,
    type: "MODIFIED",
    reason: "local",
    observedAt: now.toISOString(),
    children: await childKeys(api, operator, object),
    object: object as NonNullable<KeyEvent["object"]>,
  };
}

/** What the bridge's index holds for the parent: each owned kind's objects labelled with its uid and controlled by it. */
async function childKeys(api: KubeApi, operator: Operator<unknown>, parent: KubeObject): Promise<ChildKey[]> {
  const uid = parent.metadata.uid ?? "";
  const perKind = await Promise.all(
    operator.owns.map(async (owned) => (await listOwnedBy(api, owned, parent)).flatMap((o) => childKeyOf(owned, o, uid, operator.fieldManager) ?? [])),
  );
  return perKind.flat();
}

/** Every write, recorded with the object it would change (read first, from etcd). */
function recording(api: KubeApi, writes: RecordedWrite[]): KubeApi {
  const noted = async (verb: RecordedWrite["verb"], ref: ResourceRef, write: () => Promise<KubeObject | undefined>): Promise<KubeObject> => {
    const live = ref.name === undefined ? undefined : await api.get(ref);
    const after = await write();
    writes.push({ verb, ref, live, after });
    return after as KubeObject;
  };
  return {
    get: (ref, read) => api.get(ref, read),
    list: (ref, selector, read) => api.list(ref, selector, read),
    replaceStatus: (ref, object, fieldManager) => noted("status", ref, () => api.replaceStatus(ref, object, fieldManager)),
    mergePatch: (ref, patch, fieldManager) => noted("patch", ref, () => api.mergePatch(ref, patch, fieldManager)),
    apply: (ref, object, fieldManager) => noted("apply", { ...ref, name: object.metadata.name }, () => api.apply(ref, object, fieldManager)),
    create: (ref, object) => noted("create", ref, () => api.create(ref, object)),
    delete: async (ref, preconditions) => {
      await noted("delete", ref, async () => {
        await api.delete(ref, preconditions);
        return undefined;
      });
    },
  };
}
