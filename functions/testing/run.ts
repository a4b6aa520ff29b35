// Runs the whole runtime path for one object against the in-memory API server: a key event as
// the bridge would publish it → fresh read → finalizer → spec validation → reconcile → children
// → status merge → failure conditions and Events (or finalize, for an object being deleted).
import { pino } from "pino";
import type { KeyEvent } from "../../core/event.ts";
import type { Operator } from "../../core/operator.ts";
import { nextReconcileOf, type NextReconcile } from "../../core/schedule.ts";
import type { KubeObject } from "../runtime/kube-api.ts";
import type { HandledOutcome } from "../runtime/runtime.ts";
import { createRuntime } from "../runtime/runtime.ts";
import { createFakeKube, type FakeKube } from "./fake-kube.ts";

/** The object to reconcile: at least a name and a spec; apiVersion and kind come from the operator. */
export interface ObjectInput {
  apiVersion?: string;
  kind?: string;
  metadata: { name: string; namespace?: string | undefined; labels?: Record<string, string> | undefined; annotations?: Record<string, string> | undefined; finalizers?: string[] | undefined };
  spec: unknown;
  status?: Record<string, unknown>;
}

export interface RunOptions {
  /** The API server to run against; by default a new empty one. Pass one to run several reconciles in a row. */
  kube?: FakeKube;
  /** The runtime's clock (ctx.now); default a fixed instant. */
  now?: Date;
  /** Delete the object first: with the operator's finalizer on it, this exercises finalize. */
  deleting?: boolean;
}

export interface RunResult {
  /** The object as stored afterwards; undefined once it is gone (finalized). */
  object: KubeObject | undefined;
  /** The objects this object controls (controller owner reference to it). */
  children: KubeObject[];
  /** The Events recorded about this object. */
  events: KubeObject[];
  outcome: HandledOutcome;
  /**
   * When the object asked to be reconciled again and why (requeueAfterSeconds, a retried failure,
   * an unfinished finalize), as recorded in its status for the bridge to announce; undefined if not.
   */
  nextReconcile: NextReconcile | undefined;
  kube: FakeKube;
}

const DEFAULT_NOW = new Date("2026-01-01T00:00:00Z");

export async function reconcileWithRuntime<Spec>(operator: Operator<Spec>, object: ObjectInput, options: RunOptions = {}): Promise<RunResult> {
  const now = options.now ?? DEFAULT_NOW;
  const clock = () => now;
  const kube = options.kube ?? createFakeKube({ clock });
  const { resource } = operator;
  const namespace = resource.scope === "Namespaced" ? (object.metadata.namespace ?? "default") : undefined;
  const ref = { group: resource.group, version: resource.version, plural: resource.plural, name: object.metadata.name, ...(namespace ? { namespace } : {}) };
  const body = { ...object, apiVersion: operator.apiVersion, kind: resource.kind, metadata: { ...object.metadata, ...(namespace ? { namespace } : {}) } };

  const stored = await kube.get(ref);
  if (!stored) kube.put(ref, options.deleting && operator.finalizer ? { ...body, metadata: { ...body.metadata, finalizers: [...new Set([...(body.metadata.finalizers ?? []), operator.finalizer])] } } : body);
  else await kube.mergePatch(ref, { metadata: { labels: body.metadata.labels ?? null, annotations: body.metadata.annotations ?? null }, spec: body.spec ?? null });
  if (object.status) kube.setStatus(ref, object.status);
  if (options.deleting) await kube.delete(ref);

  const current = await kube.get(ref);
  const runtime = createRuntime(operator, {
    api: kube,
    logger: pino({ level: "silent" }),
    clock,
  });
  const event: KeyEvent = {
    v: 1,
    cluster: "test",
    group: resource.group,
    version: resource.version,
    plural: resource.plural,
    kind: resource.kind,
    ...(namespace ? { namespace } : {}),
    name: object.metadata.name,
    uid: current?.metadata.uid ?? "",
    resourceVersion: current?.metadata.resourceVersion ?? "",
    generation: current?.metadata.generation ?? 0,
    type: "MODIFIED",
    reason: "watch",
    observedAt: now.toISOString(),
  };
  const outcome = await runtime.handle({ id: `test-${event.resourceVersion}`, body: JSON.stringify(event) });
  const uid = current?.metadata.uid;
  const regarding = (e: KubeObject) => ((e.regarding ?? e.involvedObject) as { uid?: string } | undefined)?.uid === uid;
  const after = await kube.get(ref);
  return {
    object: after,
    children: kube.objects().filter((o) => ((o.metadata.ownerReferences as Array<{ uid?: string; controller?: boolean }> | undefined) ?? []).some((r) => r.controller && r.uid === uid)),
    events: kube.events().filter(regarding),
    outcome,
    nextReconcile: nextReconcileOf(after?.status),
    kube,
  };
}
