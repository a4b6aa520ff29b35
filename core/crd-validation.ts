// What an operator author adds to a zod schema so the API server checks it at admission, before
// anything is stored: CEL rules, immutable fields, embedded objects and free-form fields. Each
// helper records the CRD's own keyword in zod's metadata (`.meta()`, zod's global registry, which
// every copy of zod shares), so a schema stays a plain zod schema and deploy/crd-schema.ts reads it back.
import { z } from "zod";

/** One `x-kubernetes-validations` entry, as apiextensions.k8s.io/v1 spells it. */
export interface CelRule {
  /** A CEL expression over `self` (and `oldSelf` on updates) that must be true. */
  rule: string;
  /** What the API server answers when the rule is false (one line). */
  message?: string;
  /** A CEL expression giving the message, e.g. `"'at most 10, not ' + string(self.replicas)"`. */
  messageExpression?: string;
  /** The error type reported (default FieldValueInvalid). */
  reason?: CelReason;
  /** The field the error names, relative to the rule's field, e.g. `".replicas"`. */
  fieldPath?: string;
  /** Evaluate a transition rule (one reading `oldSelf`) on creation too, with `oldSelf` an optional. */
  optionalOldSelf?: boolean;
}

export type CelReason = "FieldValueInvalid" | "FieldValueForbidden" | "FieldValueRequired" | "FieldValueDuplicate";

/** What `cel()` takes besides the rule. */
export type CelOptions = Omit<CelRule, "rule">;

export const VALIDATIONS = "x-kubernetes-validations";
export const PRESERVE_UNKNOWN_FIELDS = "x-kubernetes-preserve-unknown-fields";
export const EMBEDDED_RESOURCE = "x-kubernetes-embedded-resource";

/**
 * Marks the rule `immutable()` adds. A symbol (from the global symbol registry, so a second copy
 * of crdfn agrees) is invisible to JSON: zod's own toJSONSchema still prints a plain rule.
 */
export const IMMUTABLE: unique symbol = Symbol.for("crdfn.immutable");
export type ImmutableRule = CelRule & { [IMMUTABLE]?: true };

/** The API server's check of each rule's shape; the CEL itself is compiled by the API server. */
const nonBlank = (what: string) => z.string().regex(/\S/, `${what} is empty`);
export const celRuleSchema = z.strictObject({
  rule: nonBlank("rule"),
  message: nonBlank("message")
    .regex(/^[^\r\n]*$/, "message must be one line")
    .optional(),
  messageExpression: nonBlank("messageExpression").optional(),
  reason: z.enum(["FieldValueInvalid", "FieldValueForbidden", "FieldValueRequired", "FieldValueDuplicate"]).optional(),
  fieldPath: z
    .string()
    .regex(/^(\.|\[)[^\r\n]*$/, "fieldPath must start with . or [ (e.g. .replicas)")
    .optional(),
  optionalOldSelf: z.boolean().optional(),
});

function validationsOf(schema: z.ZodType): CelRule[] {
  const rules = schema.meta()?.[VALIDATIONS];
  return Array.isArray(rules) ? (rules as CelRule[]) : [];
}

function withRule<T extends z.ZodType>(schema: T, rule: ImmutableRule): T {
  return schema.meta({ [VALIDATIONS]: [...validationsOf(schema), rule] });
}

/**
 * A CEL rule the API server checks on this field at admission: `cel(z.number().int(), "self <= 10",
 * "at most 10")`. Rules that read `oldSelf` run on updates only (transition rules).
 */
export function cel<T extends z.ZodType>(schema: T, rule: string, message?: string | CelOptions): T {
  return withRule(schema, { rule, ...(typeof message === "string" ? { message } : message) });
}

/**
 * The field cannot change once the object exists: `self == oldSelf`. On a field that may be left
 * out, it also cannot be added or removed later (a rule on the nearest field that is always there
 * checks that, since the API server skips a transition rule when the value is absent on one side).
 */
export function immutable<T extends z.ZodType>(schema: T, message?: string): T {
  return withRule(schema, { rule: "self == oldSelf", ...(message ? { message } : {}), [IMMUTABLE]: true });
}

const anyObject = () => z.record(z.string(), z.unknown());

/**
 * A field kept exactly as written (`x-kubernetes-preserve-unknown-fields`): `freeForm()` is any
 * object; `freeForm(z.object({ containers: … }))` checks the named fields and keeps the rest, in
 * the CRD and in the object reconcile sees (it is the object's `.loose()`).
 */
export function freeForm(): ReturnType<typeof anyObject>;
export function freeForm<S extends z.core.$ZodLooseShape>(schema: z.ZodObject<S>): z.ZodObject<S, z.core.$loose>;
export function freeForm(schema?: z.ZodObject): z.ZodType {
  return schema ? schema.loose() : anyObject();
}

const anyResource = () => z.looseObject({ apiVersion: z.string(), kind: z.string(), metadata: z.looseObject({}).optional() });

/**
 * A whole Kubernetes object held in a field (`x-kubernetes-embedded-resource`): the API server
 * requires its apiVersion and kind and validates its metadata as any object's. `embedded()` takes
 * any kind and keeps every field; pass a z.object declaring `apiVersion` and `kind` to check more.
 */
export function embedded(): ReturnType<typeof anyResource>;
export function embedded<T extends z.ZodObject>(schema: T): T;
export function embedded(schema?: z.ZodObject): z.ZodType {
  return (schema ?? anyResource()).meta({ [EMBEDDED_RESOURCE]: true });
}
