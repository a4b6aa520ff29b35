// Runs the whole runtime path for one object against the in-memory API server: a key event as
// the bridge would publish it → fresh read → finalizer → spec validation → reconcile → children
// → status merge → failure conditions and Events (or finalize, for an object being deleted:
// `deleting: true`, or an object given a deletionTimestamp, as the runtime tells them apart).
import { randomBytes } from "node:crypto";
import { pino } from "pino";
import { signKeyEvent } from "../../core/event-auth.ts";
import { APPLIED_HASH_ANNOTATION, PARENT_UID_LABEL, type KeyEvent, type ChildKey } from "../../core/event.ts";
import { apiVersionOf, pluralOf, type DesiredObject, type Operator } from "../../core/operator.ts";
import { nextReconcileOf, type NextReconcile } from "../../core/schedule.ts";
import { type KubeObject, type KubeApi, type ResourceRef } from "../runtime/kube-api.ts";
import { handleMessage, createRuntime, type HandledOutcome } from "../runtime/runtime.ts";
import { createFakeKube, type FakeKube } from "./fake-kube.ts";
import { objectInputOf, type ObjectInput, type TestObjectInput } from "./object.ts";
import { ownershipVerdict } from "../../core/ownership.ts";
import { fenceOf, fenceVerdict } from "../../core/fence.ts";

export interface RunOptions {
  /**
   * The API server to run against; by default a new empty one. Pass a previous run's `kube` to
   * run several reconciles in a row: the object there is updated (labels, annotations, spec) from
   * the one given, and its children, status and finalizers are what the earlier runs left.
   */
  kube?: FakeKube;
  /**
   * The runtime's clock: ctx.now of reconcile, effects and finalize, and what `nextReconcile` is
   * counted from. Default 2026-01-01T00:00:00Z. A new API server takes it as its clock too
   * (creationTimestamp, deletionTimestamp); one passed in `kube` keeps the clock it was made with.
   */
  now?: Date;
  /**
   * Delete the object first, then run: finalize runs if the operator has a `finalizer`, which is
   * added to an object not stored yet (an object already stored carries it from its first run).
   * An object given a `metadata.deletionTimestamp` is deleted the same way, its finalizers as given.
   */
  deleting?: boolean;
  /**
   * Other objects put in the cluster first (the Secrets it references, an existing child), each
   * with apiVersion, kind and metadata.name, at the REST location of the kind the operator
   * declares in `reads` or `owns`; namespace "default" if namespaced. One already there is replaced.
   */
  objects?: ReadonlyArray<OtherObject>;
  /** The function's environment, which effects and finalize get as ctx.env. Default {}. */
  env?: Record<string, string | undefined>;
}

/** An object of another kind, put in the cluster as it is: shaped as a child reconcile returns. */
export type OtherObject = DesiredObject;

export interface RunResult {
  /** The object as stored afterwards (its status, conditions and finalizers); undefined once it is gone (finalized). */
  object: KubeObject | undefined;
  /** The objects this object controls (controller owner reference to it); none once it is gone (garbage-collected). */
  children: KubeObject[];
  /**
   * The objects named in the operator's `shares` as stored afterwards, every parent's
   * contributions merged (in this object's namespace, for a namespaced one); those not there are
   * left out. After finalize, what remains once its `ctx.release` withdrew this object's fields.
   */
  shared: KubeObject[];
  /** The Events recorded about this object (events.k8s.io/v1 and core/v1), oldest first. */
  events: KubeObject[];
  /**
   * How the runtime handled the event, as the function's adapter sees it: `result` "success"
   * (`detail` "finalized" after finalize), "retry-later" (`delaySeconds`: a TemporaryError, any
   * other throw on the object's backoff, an unfinished finalize), "permanent" (`detail` the
   * reason: a PermanentError, an invalid spec), "retry" (the failure could not be recorded: the
   * queue redelivers), "unavailable" (the API server was) or "dead-letter"; `apiCalls`, the API
   * requests it made. The object's conditions and Events say the same to a user.
   */
  outcome: HandledOutcome;
  /**
   * When the object asked to be reconciled again and why (requeueAfterSeconds, a timer's `every`,
   * a retried failure, an unfinished finalize), as recorded in its status for the bridge to
   * announce; undefined if not. No run follows by itself: call reconcileWithRuntime again.
   */
  nextReconcile: NextReconcile | undefined;
  /** The API server it ran against: pass it as `kube` to the next run, or inspect any object (`kube.objects({ kind })`). */
  kube: FakeKube;
}

const DEFAULT_NOW = new Date("2026-01-01T00:00:00Z");

/**
 * Runs one event for `object` through the runtime, as the bridge would announce it, against the
 * in-memory API server. `object`: as testObject takes it (a manifest's metadata and spec; a
 * testObject result too), its spec unchecked: the runtime validates it, as it does what it reads
 * from the API server. Server-set metadata (uid, resourceVersion, generation) is the API server's
 * to assign. An object being deleted (`deleting`, or a `deletionTimestamp` with the operator's
 * finalizer among its finalizers) is finalized, not reconciled, as the runtime does
 * (functions/runtime/finalizer.ts).
 */
export async function reconcileWithRuntime<Spec>(
  operator: Operator<Spec>,
  input: ObjectInput | TestObjectInput<unknown>,
  options: RunOptions = {},
): Promise<RunResult> {
  const object = objectInputOf(input);
  const now = options.now ?? DEFAULT_NOW;
  const clock = () => now;
  const kube = options.kube ?? createFakeKube({ clock });
  const { resource } = operator;
  const namespace = resource.scope === "Namespaced" ? (object.metadata.namespace ?? "default") : undefined;
  const ref = { group: resource.group, version: resource.version, plural: resource.plural, name: object.metadata.name, ...(namespace ? { namespace } : {}) };
  const body = { ...object, apiVersion: operator.apiVersion, kind: resource.kind, metadata: { ...object.metadata, ...(namespace ? { namespace } : {}) } };

  for (const other of options.objects ?? []) await putOther(kube, operator, other);
  const deleting = options.deleting === true || object.metadata.deletionTimestamp !== undefined;
  const stored = await kube.get(ref);
  if (stored)
    await kube.mergePatch(ref, { metadata: { labels: body.metadata.labels ?? null, annotations: body.metadata.annotations ?? null }, spec: body.spec ?? null });
  const known =
    stored ??
    kube.put(
      ref,
      options.deleting && operator.finalizer
        ? { ...body, metadata: { ...body.metadata, finalizers: [...new Set([...(body.metadata.finalizers ?? []), operator.finalizer])] } }
        : body,
    );
  // Without finalizers, an object put as being deleted is gone already.
  if (object.status && (await kube.get(ref))) kube.setStatus(ref, object.status);
  if (deleting) await kube.delete(ref);

  const current = await kube.get(ref);
  // Gone already (put as deleted, with no finalizer to hold it): the bridge's last word on it names what was stored.
  const last = current ?? known;
  // A key of this run alone: the event below is what a bridge would sign.
  const eventKey = { kid: "testing", secret: randomBytes(32) };
  const runtime = createRuntime(operator, {
    api: asTheFunction(kube, operator as Operator<unknown>),
    logger: pino({ level: "silent" }),
    clock,
    env: options.env ?? {},
    cluster: "test",
    eventKeys: new Map([[eventKey.kid, eventKey.secret]]),
  });
  // What the bridge would announce: the object as stored and the keys of its current children.
  const event: KeyEvent = {
    v: 2,
    cluster: "test",
    group: resource.group,
    version: resource.version,
    plural: resource.plural,
    kind: resource.kind,
    ...(namespace ? { namespace } : {}),
    name: object.metadata.name,
    uid: last?.metadata.uid ?? "",
    resourceVersion: last?.metadata.resourceVersion ?? "",
    generation: last?.metadata.generation ?? 0,
    type: current ? "MODIFIED" : "DELETED",
    reason: "watch",
    observedAt: now.toISOString(),
    ...(current ? { object: current as unknown as NonNullable<KeyEvent["object"]> } : {}),
    children: current ? childKeys(kube, operator, current) : [],
  };
  const outcome = await handleMessage(runtime, { id: `test-${event.resourceVersion}`, body: JSON.stringify(signKeyEvent(event, eventKey)) });
  const uid = last?.metadata.uid;
  const regarding = (e: KubeObject) => ((e.regarding ?? e.involvedObject) as { uid?: string } | undefined)?.uid === uid;
  const after = await kube.get(ref);
  return {
    object: after,
    children: kube
      .objects()
      .filter((o) =>
        ((o.metadata.ownerReferences as Array<{ uid?: string; controller?: boolean }> | undefined) ?? []).some((r) => r.controller && r.uid === uid),
      ),
    shared: sharedObjects(kube, operator, namespace),
    events: kube.events().filter(regarding),
    outcome,
    nextReconcile: nextReconcileOf(after?.status),
    kube,
  };
}

/**
 * The API server as the operator's function meets it: its writes onto what another controls are
 * refused, and a child's write from an older generation of its parent, as the generated admission
 * policy makes a real one do (core/ownership.ts, core/fence.ts).
 */
export function asTheFunction(kube: FakeKube, operator: Operator<unknown>): KubeApi {
  return kube.as(({ ref: written, name, existing, next }) => {
    const kind = { group: written.group, kind: kindOf(operator, written), plural: written.plural };
    const owned = operator.owns.some((o) => o.group === written.group && o.plural === written.plural);
    return (
      ownershipVerdict(operator, operator.resource.kind.toLowerCase(), kind, name, existing, next) ??
      (owned ? fenceVerdict(written.plural, name, existing, next) : undefined)
    );
  });
}

/**
 * Puts (or replaces) another object: where the operator declares its kind (reads, owns), at that
 * kind's REST location; namespaced unless the declaration says it is not.
 */
async function putOther(kube: FakeKube, operator: Operator<unknown>, o: OtherObject): Promise<void> {
  const declared = [...operator.reads, ...operator.owns].find((k) => apiVersionOf(k.group, k.version) === o.apiVersion && k.kind === o.kind);
  const [group, version] = o.apiVersion.includes("/") ? (o.apiVersion.split("/") as [string, string]) : ["", o.apiVersion];
  const namespaced = declared?.namespaced ?? true;
  const namespace = namespaced ? (o.metadata.namespace ?? "default") : undefined;
  const ref = { group, version, plural: declared?.plural ?? pluralOf(o.kind), name: o.metadata.name, ...(namespace ? { namespace } : {}) };
  const body = { ...o, metadata: { ...o.metadata, ...(namespace ? { namespace } : {}) } };
  if (await kube.get(ref)) await kube.delete(ref);
  kube.put(ref, body);
}

/** The objects the operator's `shares` names, where this object's shared objects live. */
function sharedObjects(kube: FakeKube, operator: Operator<unknown>, namespace: string | undefined): KubeObject[] {
  return operator.shares.flatMap((s) => {
    const namespaced = operator.owns.find((o) => o.group === s.group && o.kind === s.kind)?.namespaced ?? true;
    return kube
      .objects({ kind: s.kind, ...(namespaced && namespace ? { namespace } : {}) })
      .filter((o) => o.metadata.name === s.name && (o.apiVersion.includes("/") ? o.apiVersion.split("/")[0] : "") === s.group);
  });
}

/** The kind a write names, among the operator's owned kinds (its plural otherwise: not owned, not checked). */
function kindOf(operator: Operator<unknown>, ref: ResourceRef): string {
  return operator.owns.find((o) => o.group === ref.group && o.plural === ref.plural)?.kind ?? ref.plural;
}

/** The bridge's keys of a parent's children: labelled with its uid, controlled by it; the hash only after the function's own apply; the fence. */
export function childKeys(kube: FakeKube, operator: Operator<unknown>, parent: KubeObject): ChildKey[] {
  const uid = parent.metadata.uid;
  const keys: ChildKey[] = [];
  for (const owned of operator.owns) {
    const apiVersion = apiVersionOf(owned.group, owned.version);
    for (const o of kube.objects({ kind: owned.kind })) {
      const labelled = (o.metadata.labels as Record<string, string> | undefined)?.[PARENT_UID_LABEL] === uid;
      const controlled = ((o.metadata.ownerReferences as Array<{ uid?: string; controller?: boolean }> | undefined) ?? []).some(
        (r) => r.controller && r.uid === uid,
      );
      if (!labelled || !controlled || o.apiVersion !== apiVersion) continue;
      const ref = {
        group: owned.group,
        version: owned.version,
        plural: owned.plural,
        name: o.metadata.name,
        ...(o.metadata.namespace ? { namespace: o.metadata.namespace } : {}),
      };
      const hash = (o.metadata.annotations as Record<string, string> | undefined)?.[APPLIED_HASH_ANNOTATION];
      const ours = kube.lastContentWriter(ref) === `apply:${operator.fieldManager}`;
      const fence = fenceOf(o);
      keys.push({
        apiVersion,
        kind: owned.kind,
        ...(o.metadata.namespace ? { namespace: o.metadata.namespace } : {}),
        name: o.metadata.name,
        uid: o.metadata.uid ?? "",
        resourceVersion: o.metadata.resourceVersion ?? "",
        ...(ours && hash ? { appliedHash: hash } : {}),
        ...(fence === undefined ? {} : { parentGeneration: fence }),
      });
    }
  }
  return keys;
}
