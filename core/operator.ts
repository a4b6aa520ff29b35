// The operator contract: what a user of crdfn writes. Pure data and pure functions; the
// runtime in functions/ does every read and write around them.
import { RECONCILED_FIELD } from "./reconciled.ts";
import type { z } from "zod";
import type { Condition, ConditionInput } from "./conditions.ts";
import type { CelRule } from "./crd-validation.ts";

export type Scope = "Namespaced" | "Cluster";

/** An additionalPrinterColumns entry of the generated CRD (`kubectl get` columns). */
export interface PrinterColumn {
  name: string;
  type: "string" | "integer" | "number" | "boolean" | "date";
  jsonPath: string;
  description?: string;
  format?: string;
  priority?: number;
}

/** The scale subresource, so `kubectl scale` and autoscalers can drive the resource. */
export interface ScaleSubresource {
  specReplicasPath: string;
  statusReplicasPath: string;
  labelSelectorPath?: string;
}

/**
 * One version the CRD serves besides (or including) the reconciled one. Every version shares the
 * operator's spec schema, so the API server converts between them with strategy None (it only
 * rewrites apiVersion); versions whose shapes differ would need a conversion webhook, which crdfn
 * does not generate.
 */
export interface ResourceVersion {
  name: string;
  /** Default true. */
  served?: boolean;
  /** The one version objects are stored as. Default: the reconciled version. */
  storage?: boolean;
  deprecated?: boolean;
  /** What `kubectl` prints for a deprecated version. */
  deprecationWarning?: string;
}

export interface ResourceDefinition {
  group: string;
  /** The version the operator reads, reconciles and watches. */
  version: string;
  /** Every version the CRD serves (default: only `version`); `version` must be among them. */
  versions?: ResourceVersion[];
  plural: string;
  kind: string;
  /** Default "Namespaced". */
  scope?: Scope;
  /** Default: the kind in lower case. */
  singular?: string;
  shortNames?: string[];
  categories?: string[];
  printerColumns?: PrinterColumn[];
  scale?: ScaleSubresource;
  /**
   * CEL rules on the spec (`self` is the spec, `oldSelf` the spec before an update) that the API
   * server checks on every create and update, before anything is stored.
   */
  validations?: CelRule[];
}

/** A kind the operator creates and owns (controller owner reference, garbage-collected with it). */
export interface OwnedKind {
  group: string;
  version: string;
  kind: string;
  /** Default: the kind's regular English plural in lower case (ConfigMap → configmaps). */
  plural?: string;
  /** Default true. */
  namespaced?: boolean;
  /**
   * Pass this kind's current children to reconcile (`ctx.children.of(kind)`), as read before it
   * runs: a child a reconcile applies is seen by the next reconcile, not by that one. Default false.
   */
  observe?: boolean;
  /** Delete children of this kind this parent applied earlier and no longer returns. Default true. */
  prune?: boolean;
  /**
   * Let the function list this kind in the namespaces it serves (RBAC `list`: every object of the
   * kind there, not only its children), for parents with more children than an event carries keys
   * for (about 1,500): one labelled LIST finds them, so unchanged ones are skipped and dropped ones
   * pruned. Default false: such a parent's reconcile applies every child of this kind it wants and
   * prunes none, and says so.
   */
  list?: boolean;
  /**
   * Take over an existing object of this kind that has no controller (an orphan). Default false:
   * an existing object this parent does not control is never applied onto (ChildConflict).
   */
  adopt?: boolean;
}

/**
 * An object without an owner that `shared` contributes to, by name: the only objects of its kind
 * the generated admission policy lets the function write without a controller owner reference.
 */
export interface SharedObject {
  group: string;
  kind: string;
  name: string;
  /** Default: as for OwnedKind. */
  plural?: string;
}

export interface ObjectMeta {
  name: string;
  namespace?: string;
  uid: string;
  resourceVersion: string;
  generation: number;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  finalizers?: string[];
}

/** The status the runtime keeps: the user's fields plus the standard ones it owns. */
export type ObjectStatus = Record<string, unknown> & { observedGeneration?: number; conditions?: Condition[] };

/** The custom resource as reconcile sees it: the spec already validated by the operator's schema. */
export interface CustomObject<Spec> {
  apiVersion: string;
  kind: string;
  metadata: ObjectMeta;
  spec: Spec;
  status?: ObjectStatus;
}

/** A desired object; the runtime adds namespace (if omitted), owner reference and field manager. */
export interface DesiredObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  [field: string]: unknown;
}

/** Names an object without its contents (used to release a shared object). */
export interface ObjectReference {
  apiVersion: string;
  kind: string;
  name: string;
  namespace?: string;
}

/** A child as the API server returns it (metadata, spec and the status its controller wrote). */
export interface ObservedObject {
  apiVersion: string;
  kind: string;
  metadata: ObjectMeta & { ownerReferences?: Array<Record<string, unknown>>; [field: string]: unknown };
  spec?: Record<string, unknown>;
  status?: Record<string, unknown>;
  [field: string]: unknown;
}

export interface ObservedChildren {
  /**
   * The current children of an owned kind marked `observe: true`, keyed by name. Type them with
   * your own interface (`ctx.children.of<Deployment>("Deployment")`). A kind not observed throws.
   */
  of<T = ObservedObject>(kind: string, apiVersion?: string): Readonly<Record<string, T>>;
}

/**
 * A kind the operator reads besides its children: the objects its objects name (a Secret named in
 * `spec.secretRef`). The runtime reads them by name into `ctx.references` and records what it
 * read in `status.references`; the bridge watches the kind (keys only) and reconciles an object
 * again when an object it references changes, appears or goes. Its function may `get` the kind in
 * the served namespaces, nothing more.
 */
export interface ReadKind<Spec = unknown> {
  group: string;
  version: string;
  kind: string;
  /** Default: as for OwnedKind. */
  plural?: string;
  /** Default true. */
  namespaced?: boolean;
  /**
   * The names an object references, from the object (pure, like reconcile): a name, a list, or
   * nothing (undefined, null, ""). In the object's own namespace; a cluster-scoped object names a
   * namespaced kind's objects as `{ namespace, name }`. Give this or `field`.
   */
  name?(object: CustomObject<Spec>): ReferenceName | readonly ReferenceName[] | undefined | null;
  /** The field of the object holding the name (or a list of names), e.g. "spec.secretRef.name". Give this or `name`. */
  field?: string;
}

/** A referenced object's name; a namespace only from a cluster-scoped object. */
export type ReferenceName = string | { name: string; namespace?: string };

export interface ReferencedObjects {
  /**
   * The referenced objects of a kind declared in `reads`, keyed by name ("namespace/name" when a
   * cluster-scoped object names them in a namespace), as they are now. One that does not exist is
   * absent, not an error. A kind not declared in `reads` throws.
   */
  of<T = ObservedObject>(kind: string, apiVersion?: string): Readonly<Record<string, T>>;
}

export interface ReconcileContext {
  /** The only clock reconcile may read. */
  now: Date;
  /** The current children of the observed kinds. */
  children: ObservedChildren;
  /** The objects it references, of the kinds in `reads`. */
  references: ReferencedObjects;
}

/**
 * What the effect step is given. It runs under the function's own cloud identity (the Lambda's
 * role), after the object's spec is validated and before reconcile.
 */
export interface EffectsContext {
  now: Date;
  /**
   * The same for every delivery and retry of one generation of the object (from its uid and
   * generation), 32 hex characters: pass it where an API takes a client token (EC2 ClientToken,
   * Route 53 CallerReference, an Idempotency-Key header), so a redelivery never creates twice.
   */
  idempotencyKey: string;
  /** The objects it references, as reconcile sees them. */
  references: ReferencedObjects;
  /**
   * The function's environment, to build cloud clients from: process.env on Lambda and Cloud Run;
   * under `crdfn dev` the environment its function is given (the local queue's endpoint and keys).
   */
  env: Readonly<Record<string, string | undefined>>;
}

export interface EffectsResult<Status extends Record<string, unknown> = Record<string, unknown>> {
  /**
   * Status fields recording what exists outside the cluster (a URL, an ARN): written to the
   * object's status before reconcile runs, which sees them in `object.status`; returned every
   * time, like reconcile's status. Reconcile's fields win where both set one.
   */
  status?: Partial<Status>;
  /** Run again after this long (an external resource still being provisioned). */
  requeueAfterSeconds?: number;
}

/** IAM statements (Allow) added to the function's role: what its effects and finalize may do. */
export interface AwsPermission {
  actions: string[];
  /** ARNs; `${AWS::Partition}`, `${AWS::Region}` and `${AWS::AccountId}` are filled in (Fn::Sub). */
  resources: string[];
}

/** The cloud identity of the operator's function, beyond what crdfn itself needs. */
export interface CloudPermissions {
  aws?: AwsPermission[];
}

/** User status fields; `conditions` are merged with the runtime's `Ready`; `observedGeneration` is the runtime's. */
export type StatusInput = Record<string, unknown> & { conditions?: ConditionInput[] };

export interface ReconcileResult<Status extends Record<string, unknown> = Record<string, unknown>> {
  /** Objects owned by this resource: applied with a controller owner reference. */
  children?: DesiredObject[];
  /**
   * Objects several resources contribute to (a registry, a shared ConfigMap): no owner reference,
   * applied with a field manager unique to this resource, so server-side apply merges the
   * contributions; withdraw this resource's part in `finalize` with `ctx.release`.
   */
  shared?: DesiredObject[];
  /** Validated by the operator's `status` schema, when it has one, before it is written. */
  status?: Status & { conditions?: ConditionInput[] };
  /** Reconcile again after this long even if nothing changes (durable, through the queue). */
  requeueAfterSeconds?: number;
}

export interface FinalizeContext {
  /** The runtime's clock at this attempt, as reconcile's ctx.now (a retry sees a later one). */
  now: Date;
  /** The function's environment, as for effects: build cloud clients from it. */
  env: Readonly<Record<string, string | undefined>>;
  /**
   * Withdraws every field this resource contributed to a shared object (I/O): the one write
   * finalize makes in the cluster. A kind not in `owns` is PermanentError UndeclaredKind; an
   * object that is not there, nothing to do.
   */
  release(object: ObjectReference): Promise<void>;
}

/**
 * All finalize returns: whether cleanup is done. Nothing else is written for it (no children,
 * shared objects or status: its cluster writes go through ctx.release), so reconcile's keys are
 * refused here, even where a definition's type arguments are given, and defineOperator refuses any
 * other key (FinalizeResultOnly).
 */
export interface FinalizeResult {
  /** true → the finalizer is removed and the object goes; false → finalize again later, the finalizer stays. */
  done: boolean;
  /** With done: false, when to finalize again (default 5 s); ignored with done: true. */
  retryAfterSeconds?: number;
  children?: never;
  shared?: never;
  status?: never;
  requeueAfterSeconds?: never;
}

/** The keys a finalize's result has beyond FinalizeResult's, of each object it may return. */
type ExcessFinalizeKeys<Result> = Result extends unknown ? Exclude<keyof Result, keyof FinalizeResult> : never;

/**
 * Refuses a finalize returning keys FinalizeResult lacks (`Returned`: what it returns, inferred),
 * naming them. An inferred return type (an async method's) is not checked for excess keys, so
 * `{ done: true, note: "…" }` would otherwise compile and be ignored.
 */
export type FinalizeResultOnly<Returned> = [ExcessFinalizeKeys<Awaited<Returned>>] extends [never]
  ? unknown
  : { finalize: `finalize returns only done and retryAfterSeconds, not ${ExcessFinalizeKeys<Awaited<Returned>> & string}` };

/** `SpecInput` is what the schema accepts before defaults (what a manifest or a test may omit). */
export interface OperatorDefinition<Spec, SpecInput = unknown, Status extends Record<string, unknown> = Record<string, unknown>> {
  resource: ResourceDefinition;
  /** The spec schema: validates every object read and generates the CRD schema. */
  spec: z.ZodType<Spec, SpecInput>;
  /**
   * The status schema (optional): validates what reconcile returns before it is written and
   * generates the CRD's status schema. `observedGeneration` and `conditions` are the runtime's.
   */
  status?: z.ZodType<Status>;
  owns?: OwnedKind[];
  /** Kinds its objects reference by name (read by name into ctx.references; a change reconciles the referencing objects). */
  reads?: Array<ReadKind<Spec>>;
  /** The objects `shared` may name (their kinds must also be owned). */
  shares?: SharedObject[];
  finalizer?: string;
  /**
   * Pure and synchronous: no I/O, no clock except ctx.now, no randomness (a returned Promise is
   * refused; do I/O in finalize, or in a child the cluster runs). Throw TemporaryError or PermanentError.
   */
  reconcile(object: CustomObject<Spec>, ctx: ReconcileContext): ReconcileResult<Status>;
  /**
   * The one place for external I/O besides finalize (a queue, a bucket, a DNS record): async, run
   * after the spec is validated and before reconcile, with `ctx.idempotencyKey` and under the
   * function's cloud identity (grant it in `cloud`). It must be safe to run again: a message may be
   * redelivered after it did its work and before its status was written. What it returns in
   * `status` is recorded before reconcile runs; `finalize` undoes it (both required with effects).
   * Throws as reconcile does: TemporaryError, PermanentError, anything else is EffectsError.
   */
  effects?(object: CustomObject<Spec>, ctx: EffectsContext): Promise<EffectsResult<Status> | void>;
  /** Runs while the object is being deleted and still carries `finalizer`; may do I/O through ctx. */
  finalize?(object: CustomObject<Spec>, ctx: FinalizeContext): FinalizeResult | Promise<FinalizeResult>;
  /** Server-side apply field manager. Default "crdfn". */
  fieldManager?: string;
  /**
   * Re-announce every object this often (seconds), spread evenly over the period: a safety net
   * for drift no event reports. Default off: a settled object is reconciled again only when it,
   * or one of its children, changes, or when it asked to be (requeueAfterSeconds, a retry).
   */
  resyncSeconds?: number;
  /**
   * A timer: reconcile each object again this many seconds after its last successful reconcile
   * (status.nextReconcile, reason Requeue, on the bridge's schedule), or sooner if it asks for
   * sooner (requeueAfterSeconds). What notices drift no event reports, such as an external
   * resource deleted by hand.
   */
  every?: number;
  /** The cloud permissions its function's role gets (its effects' and finalize's I/O), generated into its IAM role. */
  cloud?: CloudPermissions;
  /**
   * Whether the bridge puts the object itself in its announcements (up to 64 KiB), so the
   * function need not read it: the queue then holds object bodies (SQS encrypts them at rest).
   * false: keys only, and the function reads the object (one GET per reconcile). Default true.
   */
  eventBodies?: boolean;
}

/** A definition with its defaults filled in. */
export interface Operator<Spec = unknown, SpecInput = unknown, Status extends Record<string, unknown> = Record<string, unknown>> extends OperatorDefinition<
  Spec,
  SpecInput,
  Status
> {
  resource: ResourceDefinition & { scope: Scope; singular: string };
  owns: Array<OwnedKind & { plural: string; namespaced: boolean; observe: boolean; prune: boolean; adopt: boolean; list: boolean }>;
  shares: Array<SharedObject & { plural: string }>;
  reads: Array<ReadKind<Spec> & { plural: string; namespaced: boolean }>;
  fieldManager: string;
  /** "group/version" of the resource ("v1" for the core group). */
  apiVersion: string;
}

/** Regular English plural of a kind, as Kubernetes' own REST mapper guesses it. */
export function pluralOf(kind: string): string {
  const k = kind.toLowerCase();
  if (/(s|x|z|ch|sh)$/.test(k)) return `${k}es`;
  if (/[^aeiou]y$/.test(k)) return `${k.slice(0, -1)}ies`;
  return `${k}s`;
}

export function apiVersionOf(group: string, version: string): string {
  return group === "" ? version : `${group}/${version}`;
}

/** Throws on a versions list the API server would refuse, naming what is wrong. */
function checkVersions(resource: ResourceDefinition): void {
  const versions = resource.versions;
  if (!versions) return;
  const where = `${resource.kind} versions`;
  const names = versions.map((v) => v.name);
  const twice = names.find((n, i) => names.indexOf(n) !== i);
  if (twice) throw new Error(`${where}: "${twice}" is listed twice`);
  const shaped = versions.find((v) => "schema" in v || "spec" in v);
  if (shaped) {
    throw new Error(
      `${where}: "${shaped.name}" has its own schema; every version shares the spec schema (a different shape needs a conversion webhook, which crdfn does not generate)`,
    );
  }
  const reconciled = versions.find((v) => v.name === resource.version);
  if (!reconciled) throw new Error(`${where}: the reconciled version "${resource.version}" is not listed (${names.join(", ")})`);
  if (reconciled.served === false) throw new Error(`${where}: the reconciled version "${resource.version}" must be served`);
  const storage = versions.filter((v) => v.storage === true);
  if (storage.length > 1) throw new Error(`${where}: only one version may be the storage version (${storage.map((v) => v.name).join(", ")})`);
}

const FIELD_PATH = /^[A-Za-z_$][\w$]*(\.[A-Za-z_$][\w$]*)*$/;
const AWS_ACTION = /^[a-z0-9-]+:[A-Za-z0-9*]+$/;
const RUNTIME_STATUS_FIELDS = ["observedGeneration", "conditions", "nextReconcile", "references"];

/** Throws, naming the setting, on reads, effects, every and cloud that cannot work. */
function checkExtensions(definition: OperatorDefinition<never, unknown, Record<string, unknown>>): void {
  const { kind } = definition.resource;
  const seen = new Set<string>();
  for (const [i, r] of (definition.reads ?? []).entries()) {
    const where = `${kind} reads[${i}] (${r.kind})`;
    if ((r.name === undefined) === (r.field === undefined))
      throw new Error(`${where}: give either name (a function of the object) or field (a path such as "spec.secretRef.name")`);
    if (r.field !== undefined && !FIELD_PATH.test(r.field)) throw new Error(`${where}: field "${r.field}" must be a dotted path such as "spec.secretRef.name"`);
    const id = `${apiVersionOf(r.group, r.version)}/${r.kind}`;
    if (seen.has(id)) throw new Error(`${where}: ${r.kind} is listed twice; give one entry a name function returning a list`);
    seen.add(id);
  }
  const statusShape = (definition.status as { shape?: Record<string, unknown> } | undefined)?.shape;
  if (definition.reads?.length) {
    const taken = RUNTIME_STATUS_FIELDS.find((f) => statusShape !== undefined && f in statusShape);
    if (taken) throw new Error(`${kind} status: "${taken}" is the runtime's own status field; rename yours`);
  }
  // What the function records it reconciled (core/reconciled.ts) is written for every operator.
  if (statusShape !== undefined && RECONCILED_FIELD in statusShape)
    throw new Error(`${kind} status: "${RECONCILED_FIELD}" is the runtime's own status field; rename yours`);
  if (definition.every !== undefined && !(Number.isInteger(definition.every) && definition.every >= 1 && definition.every <= 7 * 86400)) {
    throw new Error(`${kind}: every must be a whole number of seconds from 1 to 604800 (7 days), or left out (no timer)`);
  }
  if (definition.effects !== undefined && (definition.finalizer === undefined || definition.finalize === undefined)) {
    throw new Error(`${kind}: effects need a finalizer and finalize, which undoes what they made outside the cluster (else it outlives the object)`);
  }
  for (const [i, p] of (definition.cloud?.aws ?? []).entries()) {
    const where = `${kind} cloud.aws[${i}]`;
    if (!Array.isArray(p.actions) || p.actions.length === 0) throw new Error(`${where}: actions must list at least one IAM action such as "sqs:CreateQueue"`);
    const bad = p.actions.find((a) => !AWS_ACTION.test(a));
    if (bad !== undefined) throw new Error(`${where}: "${bad}" is not an IAM action such as "sqs:CreateQueue"`);
    if (!Array.isArray(p.resources) || p.resources.length === 0 || p.resources.some((r) => typeof r !== "string" || r === "")) {
      throw new Error(
        `${where}: resources must list the ARNs it may act on (a name prefix with *, such as "arn:\${AWS::Partition}:sqs:\${AWS::Region}:\${AWS::AccountId}:my-queues-*")`,
      );
    }
  }
}

export function defineOperator<
  Spec,
  SpecInput = unknown,
  Status extends Record<string, unknown> = Record<string, unknown>,
  Finalized extends FinalizeResult | Promise<FinalizeResult> = FinalizeResult | Promise<FinalizeResult>,
>(
  // The second part infers what finalize returns, for FinalizeResultOnly to refuse its unknown keys.
  definition: OperatorDefinition<Spec, SpecInput, Status> & {
    finalize?(object: CustomObject<Spec>, ctx: FinalizeContext): Finalized;
  } & FinalizeResultOnly<Finalized>,
): Operator<Spec, SpecInput, Status> {
  const { resource } = definition;
  checkVersions(resource);
  checkExtensions(definition as unknown as OperatorDefinition<never, unknown, Record<string, unknown>>);
  if (
    definition.resyncSeconds !== undefined &&
    !(Number.isInteger(definition.resyncSeconds) && definition.resyncSeconds >= 60 && definition.resyncSeconds <= 7 * 86400)
  ) {
    throw new Error(`${resource.kind}: resyncSeconds must be a whole number of seconds from 60 to 604800 (7 days), or left out (off)`);
  }
  if (definition.finalizer !== undefined && !/^[a-z0-9.-]+\/[A-Za-z0-9._-]+$/.test(definition.finalizer)) {
    throw new Error(`finalizer "${definition.finalizer}" must be a qualified name like "${resource.group}/cleanup"`);
  }
  return Object.freeze({
    ...definition,
    resource: { ...resource, scope: resource.scope ?? "Namespaced", singular: resource.singular ?? resource.kind.toLowerCase() },
    owns: (definition.owns ?? []).map((o) => ({
      ...o,
      plural: o.plural ?? pluralOf(o.kind),
      namespaced: o.namespaced ?? true,
      observe: o.observe ?? false,
      prune: o.prune ?? true,
      adopt: o.adopt ?? false,
      list: o.list ?? false,
    })),
    shares: (definition.shares ?? []).map((s) => ({ ...s, plural: s.plural ?? pluralOf(s.kind) })),
    reads: (definition.reads ?? []).map((r) => ({ ...r, plural: r.plural ?? pluralOf(r.kind), namespaced: r.namespaced ?? true })),
    fieldManager: definition.fieldManager ?? "crdfn",
    apiVersion: apiVersionOf(resource.group, resource.version),
  });
}
