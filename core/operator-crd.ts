// The CRD of an operator, generated from its zod spec schema: one source of truth for the API
// server's validation and the runtime's. Pure: the CLI writes the files.
import { stringify } from "yaml";
import { z } from "zod";
import type { Operator, ResourceDefinition } from "./operator.ts";

type Json = Record<string, unknown>;

/** Keywords a structural OpenAPI v3 schema may carry; anything else zod emits is an error. */
const KEPT = new Set([
  "type", "format", "description", "properties", "required", "items", "additionalProperties", "enum",
  "pattern", "minLength", "maxLength", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
  "multipleOf", "minItems", "maxItems", "uniqueItems", "minProperties", "maxProperties", "default", "nullable",
]);

/** zod's bounds for a plain `.int()`; they say nothing a reader needs. */
const SAFE_INTEGER_BOUNDS = new Set([Number.MAX_SAFE_INTEGER, Number.MIN_SAFE_INTEGER]);

/**
 * Converts zod's OpenAPI 3.0 JSON Schema into the structural subset Kubernetes accepts: no
 * `$schema`, `const` as a one-value enum, no `additionalProperties: false` (pruning already drops
 * unknown fields), every node typed. Refinements are not representable: they stay in zod only.
 */
export function structuralSchema(node: unknown, path = "spec"): Json {
  if (node === null || typeof node !== "object" || Array.isArray(node)) throw new Error(`${path}: not a schema object`);
  const out: Json = {};
  for (const [key, value] of Object.entries(node as Json)) {
    if (key === "$schema") continue;
    if (key === "const") {
      out.enum = [value];
      continue;
    }
    if (key === "additionalProperties" && value === false) continue;
    if ((key === "minimum" || key === "maximum") && SAFE_INTEGER_BOUNDS.has(value as number)) continue;
    if (!KEPT.has(key)) throw new Error(`${path}: the CRD schema cannot express "${key}" (use a zod refinement instead)`);
    if (key === "properties") {
      out.properties = Object.fromEntries(Object.entries(value as Json).map(([k, v]) => [k, structuralSchema(v, `${path}.${k}`)]));
    } else if (key === "items" || key === "additionalProperties") {
      out[key] = structuralSchema(value, `${path}.${key}`);
    } else {
      out[key] = value;
    }
  }
  if (out.type === undefined && out.enum === undefined) throw new Error(`${path}: a structural schema needs a type`);
  return out;
}

export function crdName(operator: Operator<unknown>): string {
  return `${operator.resource.plural}.${operator.resource.group}`;
}

/**
 * The apiextensions.k8s.io/v1 CustomResourceDefinition for an operator. `storedVersions` (the
 * installed CRD's status.storedVersions) keeps a version the operator no longer declares,
 * unserved: the API server refuses a CRD that drops a version objects may still be stored as.
 */
export function crdOf(operator: Operator<unknown>, storedVersions: readonly string[] = []): Json {
  const crd = oneVersionCrd(operator);
  const spec = crd.spec as { versions: Json[] };
  spec.versions = versionsOf(operator.resource, storedVersions).map((v) => ({ ...spec.versions[0], ...v }));
  return crd;
}

/** Name, served, storage and deprecation of every version; all share one schema (conversion None). */
export function versionsOf(r: ResourceDefinition, storedVersions: readonly string[] = []): Json[] {
  const declared = r.versions ?? [{ name: r.version }];
  const storage = declared.find((v) => v.storage === true)?.name ?? r.version;
  const listed = declared.map((v) => ({
    name: v.name,
    served: v.served ?? true,
    storage: v.name === storage,
    ...(v.deprecated ? { deprecated: true, ...(v.deprecationWarning ? { deprecationWarning: v.deprecationWarning } : {}) } : {}),
  }));
  const kept = storedVersions.filter((name) => !declared.some((v) => v.name === name)).map((name) => ({ name, served: false, storage: false }));
  return [...listed, ...kept];
}

function oneVersionCrd(operator: Operator<unknown>): Json {
  const r = operator.resource;
  const spec = structuralSchema(z.toJSONSchema(operator.spec, { target: "openapi-3.0", io: "input" }));
  const names: Json = { plural: r.plural, singular: r.singular, kind: r.kind };
  if (r.shortNames?.length) names.shortNames = r.shortNames;
  if (r.categories?.length) names.categories = r.categories;
  return {
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: { name: crdName(operator) },
    spec: {
      group: r.group,
      names,
      scope: r.scope,
      versions: [
        {
          name: r.version,
          served: true,
          storage: true,
          schema: {
            openAPIV3Schema: {
              type: "object",
              required: ["spec"],
              properties: {
                spec,
                // The runtime validates what it writes; the status shape is the operator's own.
                status: { type: "object", "x-kubernetes-preserve-unknown-fields": true },
              },
            },
          },
          subresources: { status: {}, ...(r.scale ? { scale: { ...r.scale } } : {}) },
          ...(r.printerColumns?.length ? { additionalPrinterColumns: r.printerColumns } : {}),
        },
      ],
    },
  };
}

/** The CRD of each operator as a YAML file: name → text (what `crdfn crd --out-dir` writes). */
export function crdFiles(operators: ReadonlyArray<Operator<unknown>>): Map<string, string> {
  return new Map(
    operators.map((op) => [
      `${crdName(op)}.yaml`,
      `# Generated by \`crdfn crd\` from the operator's zod schema. Do not edit.\n${stringify(crdOf(op), { lineWidth: 0 })}`,
    ]),
  );
}
