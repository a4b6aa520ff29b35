// One operator and a few objects, given both to crdfn/testing and to the runtime, and what each
// decided in the same words: the tests that hold the testing kit to the runtime's semantics
// (functions/testing/parity.test.ts against reconcileWithRuntime, test/testing-kit.test.ts against
// a real API server) read verdicts from here.
import { z } from "zod";
import { defineOperator, PermanentError, TemporaryError, type ReconcileResult } from "../../core/index.ts";
import { TestObjectSpecError } from "../../functions/testing/object.ts";

export const widget = defineOperator({
  resource: { group: "parity.example.com", version: "v1", plural: "widgets", kind: "Widget" },
  spec: z.object({
    size: z.number().int().min(1).max(9),
    // A rule the CRD schema cannot express: the API server stores the object, the runtime refuses it.
    label: z.string().refine((l) => l.trim() === l, "label must not start or end with whitespace"),
    /** The owned kind reconcile asks ctx.children for: ConfigMap is observed, Secret is not. */
    look: z.enum(["ConfigMap", "Secret"]).default("ConfigMap"),
  }),
  status: z.object({ configMaps: z.number().int() }),
  owns: [
    { group: "", version: "v1", kind: "ConfigMap", observe: true },
    { group: "", version: "v1", kind: "Secret" },
  ],
  reconcile(w, ctx) {
    if (w.spec.size === 4) throw new PermanentError("four is not a size", "NoFours");
    const seen = ctx.children.of(w.spec.look);
    const name = w.metadata.name;
    return {
      children: [
        { apiVersion: "v1", kind: "ConfigMap", metadata: { name: `${name}-cm` }, data: { size: String(w.spec.size), label: w.spec.label } },
        { apiVersion: "v1", kind: "Secret", metadata: { name: `${name}-secret` }, stringData: { label: w.spec.label } },
      ],
      status: { configMaps: Object.keys(seen).length },
    };
  },
});

/** Each case: the spec written, and an object of another's in the way (a Secret by the name of the object's). */
export const cases = {
  "an observed kind": { spec: { size: 2, label: "two" } },
  "a kind owned but not observed": { spec: { size: 2, label: "two", look: "Secret" } },
  "a spec the schema refuses (a refinement the CRD cannot check)": { spec: { size: 2, label: " padded " } },
  "a PermanentError": { spec: { size: 4, label: "four" } },
  "a child another controls": { spec: { size: 3, label: "three" }, foreignSecret: true },
} as const;
export type CaseName = keyof typeof cases;

/** A foreign Secret in the way of the object `name`'s child. */
export const foreignSecret = (name: string) => ({
  apiVersion: "v1",
  kind: "Secret",
  metadata: { name: `${name}-secret`, namespace: "default" },
  stringData: { mine: "yes" },
});

export type Verdict =
  | { verdict: "reconciled"; children: string[]; status: Record<string, unknown> }
  | { verdict: "invalid spec" }
  /** Ready=False: the reason, and the words that say why (an API server's refusal: crdfn's words in it). */
  | { verdict: "failed"; reason: string; message: string };

const RUNTIME_FIELDS = new Set(["conditions", "observedGeneration", "nextReconcile", "references", "reconciled"]);
const named = (objects: ReadonlyArray<{ kind?: unknown; metadata?: { name?: unknown } }>): string[] =>
  objects.map((o) => `${String(o.kind)}/${String(o.metadata?.name)}`).sort();
/** The runtime adds the API server's own words around crdfn's refusal; both servers say crdfn's the same way. */
const crdfnWords = (message: string): string => /crdfn: the \S+ function may .*$/.exec(message)?.[0] ?? message;

/** What a unit test calling reconcile directly sees, in the verdict's words. */
export function verdictOfCall(call: () => ReconcileResult): Verdict {
  try {
    const result = call();
    return { verdict: "reconciled", children: named(result.children ?? []), status: { ...result.status } };
  } catch (e) {
    if (e instanceof TestObjectSpecError) return { verdict: "invalid spec" };
    if (e instanceof PermanentError || e instanceof TemporaryError) return { verdict: "failed", reason: e.reason, message: e.message };
    // Anything else reconcile throws, the runtime shows as ReconcileError with its message.
    return { verdict: "failed", reason: "ReconcileError", message: (e as Error).message };
  }
}

interface Stored {
  kind?: unknown;
  metadata?: { name?: unknown; ownerReferences?: unknown };
  status?: Record<string, unknown>;
}

/** What the runtime recorded: the object as stored after it, and the children it controls. */
export function verdictOfRun(object: Stored | undefined, children: readonly Stored[]): Verdict {
  const status = object?.status ?? {};
  const ready = (status.conditions as Array<{ type: string; status: string; reason: string; message: string }> | undefined)?.find((c) => c.type === "Ready");
  if (ready?.status === "True")
    return { verdict: "reconciled", children: named(children), status: Object.fromEntries(Object.entries(status).filter(([k]) => !RUNTIME_FIELDS.has(k))) };
  if (ready?.reason === "InvalidSpec") return { verdict: "invalid spec" };
  return { verdict: "failed", reason: ready?.reason ?? "none", message: crdfnWords(ready?.message ?? "") };
}
