// A zod schema → the structural OpenAPI schema of a CRD, construct by construct. Each zod
// construct either has a CRD equivalent that accepts what zod accepts (refinements stay in zod;
// the few places where the two differ are said where they arise) or is refused with one line
// naming the field, the construct and what to use instead. The Kubernetes rules followed are those of
// k8s.io/apiextensions-apiserver pkg/apiserver/schema/validation.go (structural schemas) and
// pkg/apis/apiextensions/validation (x-kubernetes-validations).
import { z } from "zod";
import { sameJson } from "../core/canonical-json.ts";
import { ConfigError, zodLine } from "../core/config-error.ts";
import { celFieldName, scalarSchema, type Io } from "./crd-keywords.ts";
import { EMBEDDED_RESOURCE, IMMUTABLE, PRESERVE_UNKNOWN_FIELDS, VALIDATIONS, celRuleSchema, type CelRule, type ImmutableRule } from "../core/crd-validation.ts";

export type { Io } from "./crd-keywords.ts";
type Json = Record<string, unknown>;
type Schema = z.core.$ZodType;
type Def = z.core.$ZodTypes["_zod"]["def"];

/** A zod schema a CRD cannot express: its message is one line naming the field. */
export class CrdSchemaError extends ConfigError {}

/** One step of the path from an anchor (a node always there on both sides of an update) to a field. */
interface Step {
  name: string;
  optional: boolean;
}

/** An immutable field whose presence must not change either: its path from the node, its message. */
interface Frozen {
  path: Step[];
  message: string;
}

interface Node {
  schema: Json;
  /** This node carries `immutable()`. */
  immutable?: string;
  /** Immutable fields below this node that may be absent (see anchor()). */
  frozen: Frozen[];
}

interface At {
  path: string;
  io: Io;
  /** z.lazy schemas being expanded: meeting one again is recursion. */
  lazies: ReadonlySet<Schema>;
  /**
   * Inside the items of a list that is not a map list: the API server cannot pair an item with
   * its old value there, so a rule reading oldSelf is refused (as the API server would).
   */
  uncorrelated: boolean;
}

function refuser(at: At | string): (what: string) => never {
  return (what) => {
    throw new CrdSchemaError(`${typeof at === "string" ? at : at.path}: ${what}`);
  };
}

const defOf = (schema: Schema): Def => (schema as z.core.$ZodTypes)._zod.def;
const metaOf = (schema: Schema): Json | undefined => z.globalRegistry.get(schema);
const preservesAnything = (s: Json) => s[PRESERVE_UNKNOWN_FIELDS] === true && s.type === undefined;
const json = (value: unknown): unknown => JSON.parse(JSON.stringify(value)) as unknown;

/** What zod's constructs without a CRD equivalent should be written as instead. */
const REFUSED: Partial<Record<Def["type"], string>> = {
  date: "z.date() has no CRD schema (a manifest holds text, not a Date); use z.iso.datetime() (format date-time) and convert in reconcile",
  bigint: "z.bigint() has no CRD schema (JSON has no big integers); use z.number().int() or a z.string()",
  symbol: "z.symbol() has no CRD schema (not JSON)",
  function: "z.function() has no CRD schema (not JSON)",
  promise: "z.promise() has no CRD schema (not JSON)",
  undefined: "z.undefined() has no CRD schema (a manifest cannot hold undefined); use .optional()",
  void: "z.void() has no CRD schema (a manifest cannot hold undefined); use .optional()",
  never: "z.never() has no CRD schema; leave the field out (z.object drops unknown fields)",
  nan: "z.nan() has no CRD schema (JSON has no NaN); use z.number()",
  map: "z.map() has no CRD schema (a manifest holds objects, not Maps); use z.record(z.string(), …)",
  set: "z.set() has no CRD schema (a manifest holds arrays, not Sets); use z.array(…)",
  file: "z.file() has no CRD schema; hold the contents as z.base64()",
  custom: "z.custom()/z.instanceof() has no CRD schema (its check is a function); use a typed schema with .refine()",
  catch: ".catch() has no CRD schema: it accepts any value, which the API server would store; use .default()",
  success: "z.success() has no CRD schema (its output is whether the inner schema passed); use the inner schema",
  null: "z.null() has no CRD schema on its own (a field that is always null); use .nullable() on the field's schema",
};

function walk(schema: Schema, at: At): Node {
  return withMetadata(convert(schema, at), schema, at);
}

function convert(schema: Schema, at: At): Node {
  const def = defOf(schema);
  const refuse = refuser(at);
  const leaf = (): Node => ({ schema: scalarSchema(schema, at.io, refuse), frozen: [] });
  switch (def.type) {
    case "string":
    case "number":
    case "boolean":
    case "template_literal":
      return leaf();
    case "enum": {
      const types = new Set(Object.values(def.entries).map((v) => typeof v));
      if (types.size > 1) refuse(`z.enum() mixing ${[...types].join(" and ")} values has no CRD schema (a CRD field has one type); use one type`);
      return leaf();
    }
    case "literal":
      return literal(def.values, at);
    case "any":
    case "unknown":
      return { schema: { [PRESERVE_UNKNOWN_FIELDS]: true }, frozen: [] };
    case "optional":
    case "nonoptional":
    case "readonly":
      return walk(def.innerType, at);
    case "nullable":
      return nullable(walk(def.innerType, at), at);
    case "default":
    case "prefault": {
      const inner = walk(def.innerType, at);
      // zod's JSON Schema sets a prefault as the default of the input only.
      if (def.type === "prefault" && at.io === "output") return inner;
      return { ...inner, schema: { ...inner.schema, default: json(def.defaultValue) } };
    }
    case "pipe": {
      const side = at.io === "input" ? def.in : def.out;
      if (defOf(side).type === "transform") {
        refuse(
          at.io === "input"
            ? "z.preprocess() has no CRD schema: the API server checks the manifest as written, before any preprocessing; accept the written form and convert in reconcile"
            : "a transform's output has no CRD schema; describe what reconcile writes with a plain schema",
        );
      }
      return walk(side, at);
    }
    case "transform":
      return refuse(
        at.io === "input"
          ? "z.transform() has no CRD schema: the API server checks the manifest as written; transform after a schema (z.string().transform(…)) or in reconcile"
          : "a transform's output has no CRD schema; describe what reconcile writes with a plain schema",
      );
    case "lazy":
      return lazy(schema, def.getter(), at);
    case "object":
      return assemble(objectFields(schema, at), at);
    case "array":
      return array(schema, def.element, at);
    case "tuple":
      return tuple(schema, [...def.items, ...(def.rest ? [def.rest] : [])], at);
    case "record":
      return record(def, at);
    case "union":
      return "discriminator" in def && typeof def.discriminator === "string" ? discriminatedUnion(def.options, def.discriminator, at) : union(def.options, at);
    case "intersection":
      return intersection(def.left, def.right, at);
    default:
      return refuse(REFUSED[def.type] ?? `${def.type} has no CRD schema`);
  }
}

function literal(values: readonly unknown[], at: At): Node {
  const refuse = refuser(at);
  if (values.some((v) => v === undefined)) refuse("z.literal(undefined) has no CRD schema (a manifest cannot hold undefined); use .optional()");
  if (values.some((v) => typeof v === "bigint")) refuse("a bigint z.literal() has no CRD schema (JSON has no big integers); use a number");
  const present = values.filter((v) => v !== null);
  if (present.length === 0) refuse(REFUSED.null!);
  const types = new Set(present.map((v) => typeof v));
  if (types.size > 1) refuse(`z.literal() mixing ${[...types].join(" and ")} values has no CRD schema (a CRD field has one type); use one type`);
  // As zod's JSON Schema types a literal: JSON's number for every number.
  const node: Node = { schema: { type: [...types][0], enum: present }, frozen: [] };
  return present.length < values.length ? nullable(node, at) : node;
}

/** Go's regexp.QuoteMeta: the value as an RE2 pattern matching only itself. */
const quoteMeta = (value: string) => value.replace(/[\\.+*?()|[\]{}^$]/g, "\\$&");

/**
 * `nullable: true`. The API server refuses null for any field with an enum, null listed or not
 * (kube-openapi's enum check never matches null), so a nullable enum of strings becomes the
 * pattern matching exactly its values, which null passes; other nullable enums are refused.
 */
function nullable(node: Node, at: At): Node {
  const { enum: values, ...rest } = node.schema;
  if (!Array.isArray(values)) return { ...node, schema: { ...node.schema, nullable: true } };
  if (rest.type !== "string" || rest.pattern !== undefined || rest.allOf !== undefined) {
    refuser(at)(
      `a nullable enum of ${String(rest.type)}s has no CRD schema (the API server refuses null in an enum field); use .optional() instead of .nullable()`,
    );
  }
  const pattern = `^(?:${(values as unknown[])
    .filter((v) => v !== null)
    .map((v) => quoteMeta(v as string))
    .join("|")})$`;
  return { ...node, schema: { ...rest, pattern, nullable: true } };
}

/**
 * Recursion cannot be written as a structural schema (no $ref). One recursive schema has an
 * exact equivalent: any JSON value (zod's z.json()), which is a field kept as written.
 */
function lazy(schema: Schema, inner: Schema, at: At): Node {
  if (at.lazies.has(schema)) {
    refuser(at)(
      "a recursive schema (z.lazy) has no CRD schema (a CRD schema cannot refer to itself); use z.unknown() (any value, kept as written) where it recurses",
    );
  }
  if (isAnyJson(schema, inner)) return { schema: { [PRESERVE_UNKNOWN_FIELDS]: true }, frozen: [] };
  return walk(inner, { ...at, lazies: new Set([...at.lazies, schema]) });
}

function isAnyJson(self: Schema, inner: Schema): boolean {
  const def = defOf(inner);
  if (def.type !== "union" || "discriminator" in def) return false;
  const kinds = def.options.map((o): string => {
    const d = defOf(o);
    if (d.type === "array") return d.element === self ? "array" : "other";
    if (d.type === "record") return d.valueType === self && defOf(d.keyType).type === "string" ? "record" : "other";
    return d.type === "string" || d.type === "number" || d.type === "boolean" || d.type === "null" ? d.type : "other";
  });
  return ["array", "boolean", "null", "number", "record", "string"].every((k) => kinds.includes(k)) && !kinds.includes("other");
}

interface Field {
  node: Node;
  required: boolean;
}

interface Fields {
  fields: Map<string, Field>;
  /** Unknown fields are kept (z.looseObject / .loose() / a catchall of any value). */
  preserve: boolean;
}

/**
 * A field is required when zod refuses the object without it: not optional, not defaulted (for
 * the input), and not a schema that accepts undefined (z.unknown(), z.any()).
 */
function isRequired(schema: Schema, node: Node, io: Io): boolean {
  const opt = io === "input" ? schema._zod.optin : schema._zod.optout;
  return opt === undefined && !preservesAnything(node.schema);
}

function objectFields(schema: Schema, at: At): Fields {
  const def = defOf(schema) as z.core.$ZodObjectDef;
  const fields = new Map<string, Field>();
  for (const [name, field] of Object.entries(def.shape)) {
    const node = walk(field, { ...at, path: `${at.path}.${name}` });
    fields.set(name, { node, required: isRequired(field, node, at.io) });
  }
  let preserve = false;
  if (def.catchall) {
    const rest = defOf(def.catchall).type;
    if (rest === "unknown" || rest === "any") preserve = true;
    // never (z.strictObject): the API server drops unknown fields before zod could refuse them.
    else if (rest !== "never") {
      refuser(at)("z.object().catchall() has no CRD schema (a CRD object has either named fields or a map); put the map in a field of its own (z.record)");
    }
  }
  return { fields, preserve };
}

function assemble({ fields, preserve }: Fields, at: At, extra: Json = {}): Node {
  const properties: Json = {};
  const required: string[] = [];
  const frozen: Frozen[] = [];
  for (const [name, { node, required: isReq }] of fields) {
    properties[name] = node.schema;
    if (isReq) required.push(name);
    const step = { name, optional: !isReq };
    if (node.immutable !== undefined) frozen.push({ path: [step], message: node.immutable });
    for (const f of node.frozen) frozen.push({ ...f, path: [step, ...f.path] });
  }
  const schema: Json = { type: "object" };
  if (fields.size) schema.properties = properties;
  if (required.length) schema.required = required;
  if (preserve) schema[PRESERVE_UNKNOWN_FIELDS] = true;
  return { schema: { ...schema, ...extra }, frozen };
}

/** zod's own reading of a list's length checks (minItems, maxItems). */
function lengthBounds(schema: Schema, io: Io): Json {
  const j = z.toJSONSchema(schema, { target: "openapi-3.0", io, metadata: z.registry(), unrepresentable: "any" }) as Json;
  return { ...(j.minItems !== undefined ? { minItems: j.minItems } : {}), ...(j.maxItems !== undefined ? { maxItems: j.maxItems } : {}) };
}

function array(schema: Schema, element: Schema, at: At): Node {
  const mapList = metaOf(schema)?.["x-kubernetes-list-type"] === "map";
  const items = walk(element, { ...at, path: `${at.path}[]`, uncorrelated: !mapList });
  const anchored = mapList ? anchor(items, `${at.path}[]`) : items;
  return { schema: { type: "array", items: anchored.schema, ...lengthBounds(schema, at.io) }, frozen: [] };
}

/** A tuple whose items all have one schema is a list of fixed length; other tuples are refused. */
function tuple(schema: Schema, items: Schema[], at: At): Node {
  const nodes = items.map((item, i) => walk(item, { ...at, path: `${at.path}[${i}]`, uncorrelated: true }));
  const first = nodes[0];
  if (!first || nodes.some((n) => !sameJson(n.schema, first.schema))) {
    return refuser(at)("z.tuple() with items of different schemas has no CRD schema (a CRD list has one item schema); use an object with named fields");
  }
  return { schema: { type: "array", items: first.schema, ...lengthBounds(schema, at.io) }, frozen: [] };
}

function record(def: z.core.$ZodRecordDef, at: At): Node {
  const refuse = refuser(at);
  const key = defOf(def.keyType);
  const valueAt = { ...at, path: `${at.path}.*` };
  if (key.type === "string" && !key.checks?.length) {
    const value = anchor(walk(def.valueType, valueAt), valueAt.path);
    // Any value under any name: the object is kept as written.
    if (preservesAnything(value.schema) && Object.keys(value.schema).length === 1)
      return { schema: { type: "object", [PRESERVE_UNKNOWN_FIELDS]: true }, frozen: [] };
    return { schema: { type: "object", additionalProperties: value.schema }, frozen: [] };
  }
  // Keys from an enum: zod requires every one (z.partialRecord none), as named fields do.
  const names = key.type === "enum" ? Object.values(key.entries) : key.type === "literal" ? key.values : undefined;
  if (names?.every((n) => typeof n === "string") && (def as { mode?: string }).mode !== "loose") {
    const value = walk(def.valueType, valueAt);
    const fields = new Map(
      names.map((n) => [n, { node: { ...value, schema: json(value.schema) as Json }, required: !(def as { partial?: boolean }).partial }]),
    );
    return assemble({ fields, preserve: false }, at);
  }
  return refuse(
    "z.record() keys must be a plain z.string() or an enum of names for a CRD (the API server cannot check key patterns or lengths); use z.record(z.string(), …) with a CEL rule such as cel(…, \"self.all(k, k.matches('^[a-z]+$'))\")",
  );
}

/**
 * A union has a CRD equivalent in three cases: literals of one type (an enum), a schema or null
 * (nullable), and a string or an integer (x-kubernetes-int-or-string, whose string and integer
 * checks JSON Schema applies each to its own type only). Anything else is refused.
 */
function union(options: readonly Schema[], at: At): Node {
  const refuse = refuser(at);
  const isNull = (o: Schema) => {
    const d = defOf(o);
    return d.type === "null" || (d.type === "literal" && d.values.length === 1 && d.values[0] === null);
  };
  const rest = options.filter((o) => !isNull(o));
  const withNull = (node: Node) => (rest.length < options.length ? nullable(node, at) : node);
  if (rest.length === 0) refuse(REFUSED.null!);
  const nodes = rest.map((o) => walk(o, at));
  if (nodes.length === 1) return withNull(nodes[0]!);
  const plain = (n: Node, keys: string[]) => n.immutable === undefined && Object.keys(n.schema).every((k) => keys.includes(k));
  const types = new Set(nodes.map((n) => n.schema.type));
  if (types.size === 1 && nodes.every((n) => Array.isArray(n.schema.enum) && plain(n, ["type", "enum", "description", "title"]))) {
    const values = [...new Set(nodes.flatMap((n) => n.schema.enum as unknown[]))];
    return withNull({ schema: { type: nodes[0]!.schema.type, enum: values }, frozen: [] });
  }
  const str = nodes.find((n) => n.schema.type === "string" && plain(n, ["type", "pattern", "allOf", "minLength", "maxLength"]));
  const int = nodes.find((n) => n.schema.type === "integer" && plain(n, ["type", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"]));
  if (nodes.length === 2 && str && int) {
    const { type: _s, ...strChecks } = str.schema;
    const { type: _i, ...intChecks } = int.schema;
    return withNull({ schema: { "x-kubernetes-int-or-string": true, ...strChecks, ...intChecks }, frozen: [] });
  }
  if (nodes.some((n) => n.schema.type === "object")) {
    refuse('z.union() of objects has no CRD schema; use z.discriminatedUnion("<field>", […]) on a field each option sets to its own literal');
  }
  return refuse(
    `z.union() of ${[...types].map((t) => (typeof t === "string" ? t : "any value")).join(" and ")} has no CRD schema (a CRD field has one type); the unions a CRD can say are literals of one type (an enum), a schema or null, and z.union([z.string(), z.number().int()]) (int-or-string)`,
  );
}

/** The literal values a discriminated union's option sets its discriminator to. */
function discriminatorValues(field: Field | undefined, discriminator: string, at: At): unknown[] {
  const values = field?.node.schema.enum;
  if (!field?.required || !Array.isArray(values)) {
    return refuser(at)(`every option of a z.discriminatedUnion() must set "${discriminator}" to required literals`);
  }
  return values as unknown[];
}

/** A discriminator value as a CEL literal of the field's type (a JSON number is a CEL double). */
function celLiteral(value: unknown, type: unknown): string {
  if (typeof value === "number" && type === "number" && Number.isInteger(value)) return `${value}.0`;
  // JSON's string escapes are all CEL escapes too.
  return JSON.stringify(value);
}

/** `.name`, or `['odd-name']`: a CEL rule's fieldPath as the API server parses it. */
const fieldPathOf = (names: readonly string[]) => names.map((n) => (/^[a-zA-Z_][a-zA-Z0-9_]*$/.test(n) ? `.${n}` : `['${n}']`)).join("");

function celName(name: string, at: At): string {
  return celFieldName(name) ?? refuser(at)(`the field "${name}" cannot be named in a CEL rule (the API server's escaping has no spelling for it); rename it`);
}

/**
 * One object holding every option's fields (a field in several options must have the same schema
 * in each), the discriminator as an enum, and per option one CEL rule per required field: "when
 * the discriminator says this option, the field is there". CEL rather than a oneOf of value
 * validations, which a structural schema also allows: the API server reports a failed oneOf with
 * the first option's errors whichever option was meant, while each rule names the missing field.
 * A field of another option is not refused but kept; zod drops it when reconcile reads the object.
 */
function discriminatedUnion(options: readonly Schema[], discriminator: string, at: At): Node {
  const refuse = refuser(at);
  const variants = options.map((option) => {
    if (defOf(option).type !== "object")
      refuse("a z.discriminatedUnion() option that is not a z.object has no CRD schema; list the objects of a nested union directly");
    if ((metaOf(option)?.[VALIDATIONS] as unknown[] | undefined)?.length) {
      refuse(
        `a CEL rule on one option of a z.discriminatedUnion() has no CRD schema; put it on the union, guarded by the discriminator (self.${discriminator} != '…' || …)`,
      );
    }
    const parts = objectFields(option, at);
    return { parts, values: discriminatorValues(parts.fields.get(discriminator), discriminator, at) };
  });
  const merged = new Map<string, Field & { count: number }>();
  for (const { parts } of variants) {
    for (const [name, field] of parts.fields) {
      if (name === discriminator) continue;
      const seen = merged.get(name);
      if (!seen) merged.set(name, { node: field.node, required: false, count: 1 });
      else if (!sameJson(seen.node.schema, field.node.schema)) {
        refuse(
          `the options of this z.discriminatedUnion() declare "${name}" differently; a CRD field has one schema, so give them one schema or different names`,
        );
      } else seen.count++;
    }
  }
  for (const [name, field] of merged) {
    if (field.count < variants.length && field.node.schema.default !== undefined) {
      refuse(
        `a default on "${name}", which only some options of this z.discriminatedUnion() have, would apply to every option in a CRD; default it in reconcile`,
      );
    }
  }
  const types = new Set(variants.map((v) => v.parts.fields.get(discriminator)!.node.schema.type));
  if (types.size > 1) refuse(`the options of this z.discriminatedUnion() set "${discriminator}" to values of different types; a CRD field has one type`);
  const type = [...types][0];
  const fields = new Map<string, Field>([
    [discriminator, { node: { schema: { type, enum: [...new Set(variants.flatMap((v) => v.values))] }, frozen: [] }, required: true }],
    ...[...merged].map(([name, { node }]): [string, Field] => [name, { node, required: false }]),
  ]);
  const self = `self.${celName(discriminator, at)}`;
  const rules = variants.flatMap(({ parts, values }) => {
    const literals = values.map((v) => celLiteral(v, type));
    const other = literals.length === 1 ? `${self} != ${literals[0]}` : `!(${self} in [${literals.join(", ")}])`;
    const when = `when ${discriminator} is ${values.map(String).join(" or ")}`;
    return [...parts.fields]
      .filter(([name, f]) => f.required && name !== discriminator)
      .map(([name]): CelRule => ({
        rule: `${other} || has(self.${celName(name, at)})`,
        message: `${name} is required ${when}`,
        fieldPath: fieldPathOf([name]),
        reason: "FieldValueRequired",
      }));
  });
  return assemble({ fields, preserve: variants.some((v) => v.parts.preserve) }, at, rules.length ? { [VALIDATIONS]: rules } : {});
}

/** Two objects together are one object with the fields of both (one schema per shared field). */
function intersection(left: Schema, right: Schema, at: At): Node {
  const refuse = refuser(at);
  const sides = [left, right].map((side) => {
    if (defOf(side).type !== "object") refuse("z.intersection() of anything but two z.objects has no CRD schema; use A.extend(B.shape)");
    const parts = objectFields(side, at);
    if (parts.preserve) refuse("z.intersection() with a loose object has no CRD schema; use A.extend(B.shape).loose()");
    return parts;
  });
  const fields = new Map(sides[0]!.fields);
  for (const [name, field] of sides[1]!.fields) {
    const seen = fields.get(name);
    if (seen && !sameJson(seen.node.schema, field.node.schema))
      refuse(`the two sides of this z.intersection() declare "${name}" differently; use A.extend(B.shape)`);
    fields.set(name, seen ? { ...seen, required: seen.required || field.required } : field);
  }
  return assemble({ fields, preserve: false }, at);
}

const RULE_LIST_KEYS = new Set(["x-kubernetes-list-type", "x-kubernetes-list-map-keys", "x-kubernetes-map-type"]);

/** Descriptions, titles and the x-kubernetes-* keys of the schema's zod metadata. */
function withMetadata(node: Node, schema: Schema, at: At): Node {
  const meta = metaOf(schema);
  if (!meta) return node;
  const refuse = refuser(at);
  const out: Json = { ...node.schema };
  let immutable = node.immutable;
  for (const [key, value] of Object.entries(meta)) {
    if (key === "description" || key === "title") {
      if (typeof value === "string") out[key] = value;
    } else if (key === VALIDATIONS) {
      const rules = rulesOf(value, out, at, refuse);
      for (const r of rules) if (r.immutable) immutable = r.rule.message;
      out[VALIDATIONS] = [...((out[VALIDATIONS] as CelRule[] | undefined) ?? []), ...rules.map((r) => r.rule)];
    } else if (key === PRESERVE_UNKNOWN_FIELDS) {
      if (value !== true || out[PRESERVE_UNKNOWN_FIELDS] !== true) {
        refuse(`${PRESERVE_UNKNOWN_FIELDS} on a schema that drops unknown fields would keep what zod drops; use freeForm(…) (z.looseObject) or z.unknown()`);
      }
    } else if (key === EMBEDDED_RESOURCE) {
      if (value !== true) refuse(`${EMBEDDED_RESOURCE} must be true`);
      checkEmbedded(out, refuse);
      out[EMBEDDED_RESOURCE] = true;
    } else if (key === "x-kubernetes-int-or-string") {
      if (value !== true || out[key] !== true) refuse("x-kubernetes-int-or-string comes from z.union([z.string(), z.number().int()]); write that instead");
    } else if (RULE_LIST_KEYS.has(key)) {
      out[key] = listKeyword(key, value, out, refuse);
    } else if (key.startsWith("x-kubernetes-")) {
      refuse(
        `"${key}" is not a CRD keyword crdfn knows (it takes ${VALIDATIONS}, ${PRESERVE_UNKNOWN_FIELDS}, ${EMBEDDED_RESOURCE}, x-kubernetes-list-type, x-kubernetes-list-map-keys, x-kubernetes-map-type)`,
      );
    }
    // Other metadata (id, examples, …) belongs to other tools: the CRD has no place for it.
  }
  return { ...node, schema: out, ...(immutable !== undefined ? { immutable } : {}) };
}

/** "image is immutable", naming the field from the root (spec or status) down. */
function immutableMessage(path: string): string {
  return `${path.slice(path.indexOf(".") + 1)} is immutable`;
}

/** The CEL rules in one metadata entry, checked as the API server checks their shape. */
function rulesOf(value: unknown, node: Json, at: At, refuse: (what: string) => never): Array<{ rule: CelRule; immutable: boolean }> {
  if (!Array.isArray(value)) refuse(`${VALIDATIONS} must be a list of { rule, message }`);
  if (preservesAnything(node))
    refuse("a CEL rule on a field of any type (z.unknown(), z.any()) has no CRD schema (the API server types self from the schema); give the field a type");
  return (value as ImmutableRule[]).map((raw, i) => {
    const parsed = celRuleSchema.safeParse(raw);
    if (!parsed.success) refuse(`CEL rule ${i + 1} (${JSON.stringify((raw as Partial<CelRule> | null)?.rule)}): ${zodLine(parsed.error, { first: true })}`);
    const rule: CelRule = parsed.data;
    if (at.uncorrelated && /\boldSelf\b/.test(rule.rule)) {
      refuse(
        `the rule "${rule.rule}" reads oldSelf inside a list, where the API server cannot pair an item with its old value; put the rule on the list, or make it a map list (x-kubernetes-list-type: map)`,
      );
    }
    const immutable = raw[IMMUTABLE] === true;
    return { rule: immutable && !rule.message ? { ...rule, message: immutableMessage(at.path) } : rule, immutable };
  });
}

function checkEmbedded(node: Json, refuse: (what: string) => never): void {
  const properties = (node.properties ?? {}) as Record<string, Json>;
  const required = (node.required ?? []) as string[];
  const declares = (f: string) => properties[f]?.type === "string" && required.includes(f);
  if (node.type !== "object" || node.additionalProperties !== undefined || !declares("apiVersion") || !declares("kind")) {
    refuse(
      "an embedded resource (embedded()) must be a z.object declaring apiVersion and kind as required strings (the API server requires both); use embedded() for any kind",
    );
  }
}

function listKeyword(key: string, value: unknown, node: Json, refuse: (what: string) => never): unknown {
  if (key === "x-kubernetes-map-type") {
    if (node.type !== "object" || (value !== "granular" && value !== "atomic")) refuse(`${key} is "granular" or "atomic", on an object`);
    return value;
  }
  if (node.type !== "array") refuse(`${key} belongs on a z.array()`);
  if (key === "x-kubernetes-list-type") {
    if (value !== "atomic" && value !== "set" && value !== "map") refuse(`${key} is "atomic", "set" or "map"`);
    return value;
  }
  const items = node.items as Json;
  const required = (items.required ?? []) as string[];
  if (!Array.isArray(value) || value.length === 0 || !value.every((k) => typeof k === "string" && required.includes(k))) {
    refuse(`${key} must name required fields of the list's items`);
  }
  return value;
}

/**
 * At a node that is there on both sides of any update it is checked in (the root, a map's value,
 * a map list's item), adds one rule per immutable field below that may be absent: it must be
 * present in the new object exactly when it was in the old one. The API server runs a field's
 * own `self == oldSelf` only when both sides have the field, so without this rule removing the
 * field, or adding one left out at creation, would go through.
 */
function anchor(node: Node, path: string): Node {
  const rules: CelRule[] = [];
  for (const f of node.frozen) {
    if (!f.path.some((s) => s.optional)) continue;
    const names = f.path.map(
      (s) =>
        celFieldName(s.name) ??
        refuser(path)(`the immutable field "${s.name}" cannot be named in a CEL rule (the API server's escaping has no spelling for it); rename it`),
    );
    const present = (self: string) =>
      f.path
        .map((s, i) => (s.optional ? `has(${self}.${names.slice(0, i + 1).join(".")})` : undefined))
        .filter((c) => c !== undefined)
        .join(" && ");
    rules.push({
      rule: `(${present("self")}) == (${present("oldSelf")})`,
      message: `${f.message}: it cannot be added or removed after creation`,
      fieldPath: fieldPathOf(f.path.map((s) => s.name)),
    });
  }
  if (!rules.length) return { ...node, frozen: [] };
  return { ...node, frozen: [], schema: { ...node.schema, [VALIDATIONS]: [...((node.schema[VALIDATIONS] as CelRule[] | undefined) ?? []), ...rules] } };
}

/**
 * The structural schema of `schema` at `root` ("spec", "status"), with `rules` added to the root
 * (errors in them named at `rulesWhere`).
 * `io` is the side of zod's schema the API server sees: the input for a spec a person writes,
 * the output for the status the runtime writes from reconcile's parsed result.
 */
export function crdSchemaOf(schema: Schema, root: string, io: Io, rules: readonly CelRule[] = [], rulesWhere = root): Json {
  const at: At = { path: root, io, lazies: new Set(), uncorrelated: false };
  let node = walk(schema, at);
  if (node.schema.type !== "object") refuser(at)(`the ${root} schema must be a z.object (a CRD's ${root} is an object)`);
  if (rules.length) {
    const checked = rulesOf(rules, node.schema, at, refuser(rulesWhere)).map((r) => r.rule);
    node = { ...node, schema: { ...node.schema, [VALIDATIONS]: [...((node.schema[VALIDATIONS] as CelRule[] | undefined) ?? []), ...checked] } };
  }
  // A JSON copy: no object is shared between two places, which YAML would print as an alias.
  return json(anchor(node, root).schema) as Json;
}
