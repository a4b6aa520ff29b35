// The CRD of an operator, generated from its zod spec schema: one source of truth for the API
// server's validation and the runtime's. Pure: the CLI writes the files.
import { stringify } from "yaml";
import { ConfigError } from "../core/config-error.ts";
import { crdSchemaOf } from "./crd-schema.ts";
import type { Operator, PrinterColumn, ResourceDefinition } from "../core/operator.ts";
import { z } from "zod";
import { NEXT_RECONCILE_FIELD, nextReconcileSchema } from "../core/schedule.ts";
import { REFERENCES_FIELD, referencesSchema } from "../core/references.ts";
import { RECONCILED_FIELD, reconciledSchema } from "../core/reconciled.ts";

type Json = Record<string, unknown>;

/** metav1.Condition as the API server's own types declare it. */
const CONDITION_SCHEMA: Json = {
  type: "object",
  required: ["type", "status", "lastTransitionTime", "reason", "message"],
  properties: {
    type: { type: "string", maxLength: 316 },
    status: { type: "string", enum: ["True", "False", "Unknown"] },
    observedGeneration: { type: "integer", format: "int64", minimum: 0 },
    lastTransitionTime: { type: "string", format: "date-time" },
    reason: { type: "string", maxLength: 1024, minLength: 1 },
    message: { type: "string", maxLength: 32768 },
  },
};

/**
 * The status schema: the operator's fields (from its zod `status` schema) plus the runtime's
 * observedGeneration, conditions, nextReconcile, reconciled and (when it reads other objects) references. Without a schema, status stays free-form. No top-level
 * `required`: a failure is recorded before reconcile has ever produced the fields.
 */
export function statusSchemaOf(operator: Operator<unknown>): Json {
  if (!operator.status) return { type: "object", "x-kubernetes-preserve-unknown-fields": true };
  const user = crdSchemaOf(operator.status, "status", "output");
  const { required: _required, ...rest } = user;
  const runtime = runtimeStatusSchema();
  return {
    ...rest,
    properties: {
      ...(user.properties as Json | undefined),
      observedGeneration: { type: "integer", format: "int64", minimum: 0 },
      conditions: { type: "array", items: CONDITION_SCHEMA, "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"] },
      [NEXT_RECONCILE_FIELD]: runtime[NEXT_RECONCILE_FIELD],
      [RECONCILED_FIELD]: runtime[RECONCILED_FIELD],
      ...(operator.reads.length > 0 ? { [REFERENCES_FIELD]: runtime[REFERENCES_FIELD] } : {}),
    },
  };
}

/** The runtime's own status fields, from the zod schemas both sides parse them with: one truth for the API server's validation and theirs. */
function runtimeStatusSchema(): Json {
  const fields = z.object({ [NEXT_RECONCILE_FIELD]: nextReconcileSchema, [RECONCILED_FIELD]: reconciledSchema, [REFERENCES_FIELD]: referencesSchema });
  return crdSchemaOf(fields, "status", "output").properties as Json;
}

const READY_COLUMN: PrinterColumn = {
  name: "Ready",
  type: "string",
  jsonPath: '.status.conditions[?(@.type=="Ready")].status',
  description: "Ready condition set by the crdfn runtime",
};
/** A column kubectl prints only with -o wide. */
const wide = (name: string, type: PrinterColumn["type"], jsonPath: string, description?: string): PrinterColumn => ({
  name,
  type,
  jsonPath,
  ...(description === undefined ? {} : { description }),
  priority: 1,
});
const REASON_COLUMN = wide("Reason", "string", '.status.conditions[?(@.type=="Ready")].reason');
const ATTEMPTS_COLUMN = wide("Attempts", "integer", `.status.${NEXT_RECONCILE_FIELD}.attempts`, "Failed attempts of this generation so far");
// A string, not a date: kubectl prints a date column as an age, and a time to come has none.
const NEXT_COLUMN = wide("Next", "string", `.status.${NEXT_RECONCILE_FIELD}.at`, "When the object is reconciled again (a retry, requeueAfterSeconds)");
const AGE_COLUMN: PrinterColumn = { name: "Age", type: "date", jsonPath: ".metadata.creationTimestamp" };

/** The operator's columns with the runtime's Ready (and, with -o wide, Reason, Attempts and Next) before Age. */
export function printerColumnsOf(operator: Operator<unknown>): PrinterColumn[] {
  const declared = operator.resource.printerColumns ?? [];
  const ours = [...(declared.some((c) => c.name === READY_COLUMN.name) ? [] : [READY_COLUMN, REASON_COLUMN]), ATTEMPTS_COLUMN, NEXT_COLUMN].filter(
    (c) => !declared.some((d) => d.name === c.name),
  );
  const age = declared.findIndex((c) => c.jsonPath === AGE_COLUMN.jsonPath);
  if (age < 0) return [...declared, ...ours, AGE_COLUMN];
  return [...declared.slice(0, age), ...ours, ...declared.slice(age)];
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
  let crd: Json;
  try {
    crd = oneVersionCrd(operator);
  } catch (e) {
    // One line naming the CRD and the field: what `crdfn crd`, `crdfn generate` and `crdfn dev` print.
    if (e instanceof ConfigError) throw new ConfigError(`CRD ${crdName(operator)}: ${e.message}`);
    throw e;
  }
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
  // The input side: what a person writes in a manifest, before zod's defaults and transforms.
  const spec = crdSchemaOf(operator.spec, "spec", "input", r.validations, "resource.validations");
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
                status: statusSchemaOf(operator),
              },
            },
          },
          subresources: { status: {}, ...(r.scale ? { scale: { ...r.scale } } : {}) },
          additionalPrinterColumns: printerColumnsOf(operator),
        },
      ],
    },
  };
}

/**
 * The CRD of each operator as a YAML file: name → text (what `crdfn crd --out-dir` writes). YAML
 * 1.1 quoting, as kubectl reads YAML: a field named `n`, `y`, `on` or `no` is a boolean there.
 * `storedVersions`: by CRD name, the versions a cluster still stores objects as (kept, unserved).
 */
export function crdFiles(operators: ReadonlyArray<Operator<unknown>>, storedVersions: ReadonlyMap<string, readonly string[]> = new Map()): Map<string, string> {
  return new Map(
    operators.map((op) => [
      `${crdName(op)}.yaml`,
      `# Generated by \`crdfn crd\` from the operator's zod schema. Do not edit.\n${stringify(crdOf(op, storedVersions.get(crdName(op)) ?? []), { lineWidth: 0, version: "1.1" })}`,
    ]),
  );
}

/** The versions `storedVersions` names that the operator no longer declares (kept, unserved, by crdOf). */
export function undeclaredVersions(operator: Operator<unknown>, storedVersions: readonly string[]): string[] {
  const declared = operator.resource.versions ?? [{ name: operator.resource.version }];
  return storedVersions.filter((v) => !declared.some((d) => d.name === v));
}

/**
 * Versions a CRD generated earlier (`previous`, as parsed from its file) may hold objects as, its
 * storage version and any it kept unserved, that the operator no longer declares: applying a CRD
 * without them is refused by the API server while objects are still stored so.
 */
export function droppedVersions(operator: Operator<unknown>, previous: unknown): string[] {
  const versions = (previous as { spec?: { versions?: Array<{ name?: unknown; served?: unknown; storage?: unknown }> } } | undefined)?.spec?.versions ?? [];
  const mayHoldObjects = versions.filter((v) => typeof v.name === "string" && (v.storage === true || v.served === false)).map((v) => v.name as string);
  return undeclaredVersions(operator, mayHoldObjects);
}
