// Whose objects a function may write: never what another controller controls, as
// controller-runtime's SetControllerReference refuses. A function writes a child without reading
// it first (it may not read what it does not observe), so the API server enforces this: the
// generated ValidatingAdmissionPolicy (deploy/admission.ts) says it in CEL, the testing kit's
// in-memory API server (functions/testing/fake-kube.ts) with this predicate, and the runtime
// turns the refusal into ChildConflict. Both say the same words, so one matcher reads either.
import type { Operator } from "./operator.ts";
import { groupOf } from "./resource-path.ts";

export interface OwnerRef {
  apiVersion?: string;
  kind?: string;
  name?: string;
  uid?: string;
  controller?: boolean;
}

interface Obj {
  metadata: { name?: string; uid?: string; ownerReferences?: unknown };
}

const controllerOf = (o: Obj | undefined): OwnerRef | undefined =>
  ((o?.metadata.ownerReferences as OwnerRef[] | undefined) ?? []).find((r) => r.controller === true);

/** The fixed words of the refusal of a write that would move a child between two objects of one name. */
export const OTHER_INCARNATION_TOKEN = "crdfn: another incarnation";

/** The words of a refusal: the policy's messageExpression builds the same text in CEL. */
export const refusal = {
  create: (fn: string, resource: string, kind: string) =>
    `crdfn: the ${fn} function may write ${resource} only with a controller owner reference to its ${kind}`,
  change: (fn: string, resource: string, name: string, kind: string) =>
    `crdfn: the ${fn} function may change or delete ${resource} ${name} only if that ${kind} already controls it`,
  /**
   * The same name, another uid: an earlier (or a later) object of the parent's name. It names the
   * stored child's uid, so that the live parent deletes exactly that object (children.ts takeOver).
   */
  otherIncarnation: (fn: string, resource: string, name: string, kind: string, childUid: string) =>
    `${OTHER_INCARNATION_TOKEN}: the ${fn} function may not move ${resource} ${name} (uid ${childUid}) to another ${kind} of the same name: ` +
    `a controller is never changed; the child is taken over once the ${kind} that controls it is gone`,
};

/** The uid of the child an other-incarnation refusal names. */
export function refusedChildUid(message: string): string | undefined {
  return /\(uid ([^)\s]+)\) to another /.exec(message)?.[1];
}

/**
 * An API server's refusal of a child write whose controller reference names another object of
 * the parent's kind and name than the one that controls the child: one of the two is an earlier
 * incarnation (deleted and re-created), and only a read of the parent can tell which.
 */
export function isOtherIncarnationRefusal(e: { code: number; message: string }): boolean {
  return e.code === 403 && e.message.includes(OTHER_INCARNATION_TOKEN);
}

/** An API server's refusal of a child write because the object is another's. */
export function isOwnershipRefusal(e: { code: number; message: string }): boolean {
  if (e.code === 403) return /crdfn: the \S+ function may (write|change or delete) /.test(e.message);
  // Applying a controller reference onto an object another manager made controlled by someone else.
  return e.code === 422 && /Only one reference can have Controller set to true/i.test(e.message);
}

/**
 * Whether the operator's function may make this write to an object of a kind it owns, and why
 * not. `existing` is the stored object (absent on create), `next` the object after the write
 * (absent on delete). A child's controller is never changed by a write: not even to an object of
 * the same name (deleted and re-created), since the API server cannot tell which of the two is
 * the live one, and a write that could would let anyone holding the function's token lower a
 * child's fence in two steps (to a made-up uid and back). A re-created parent takes over its
 * earlier incarnation's child by deleting it first (functions/runtime/children.ts).
 */
export function ownershipVerdict(
  operator: Operator<unknown>,
  fn: string,
  kind: { group: string; kind: string; plural: string },
  name: string,
  existing: Obj | undefined,
  next: Obj | undefined,
): string | undefined {
  const owned = operator.owns.find((o) => o.group === kind.group && o.kind === kind.kind);
  if (!owned) return undefined;
  const shared = operator.shares.some((s) => s.group === kind.group && s.kind === kind.kind && s.name === name);
  const ours = (ref: OwnerRef | undefined) => ref !== undefined && ref.kind === operator.resource.kind && groupOf(ref.apiVersion) === operator.resource.group;
  const oldRef = controllerOf(existing);
  const newRef = controllerOf(next);
  const what = kind.plural;
  const who = operator.resource.kind;
  if (next !== undefined && !(ours(newRef) || (shared && newRef === undefined))) return refusal.create(fn, what, who);
  if (existing === undefined) return undefined;
  const changeOk =
    (oldRef === undefined && (shared || (owned.adopt && next !== undefined))) || (ours(oldRef) && (next === undefined || newRef?.uid === oldRef?.uid));
  if (changeOk) return undefined;
  return ours(oldRef) && newRef?.name === oldRef?.name
    ? refusal.otherIncarnation(fn, what, name, who, existing.metadata.uid ?? "")
    : refusal.change(fn, what, name, who);
}
