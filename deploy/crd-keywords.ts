// The keywords of one scalar field (string, number, boolean, enum, literal, template literal):
// zod's own JSON Schema of it, cut down to what a CRD says with the same meaning.
import { z } from "zod";

type Json = Record<string, unknown>;
export type Io = "input" | "output";
/** Throws the one line naming what a CRD cannot express here. */
export type Refuse = (what: string) => never;

/** zod's bounds for a plain `.int()`; they say nothing a reader needs. */
const SAFE_INTEGER_BOUNDS = new Set([Number.MAX_SAFE_INTEGER, Number.MIN_SAFE_INTEGER]);

/**
 * Value keywords a structural schema carries with JSON Schema's meaning. One difference: zod
 * counts a string's length in UTF-16 units, the API server in code points; they agree on all
 * text without characters beyond the Basic Multilingual Plane (emoji count 2 in zod, 1 there).
 */
const KEPT = new Set([
  "type",
  "enum",
  "pattern",
  "minLength",
  "maxLength",
  "minimum",
  "maximum",
  "exclusiveMinimum",
  "exclusiveMaximum",
  "multipleOf",
  "nullable",
]);

/**
 * Formats kept: every string zod's pattern for them accepts is a valid RFC 3339 date(-time), so
 * the API server's check of the format refuses nothing zod accepts, and the format types the
 * field as a timestamp in CEL rules. Any other format zod names is dropped: zod's pattern carries
 * its check, and the API server's checker of the same name is another implementation (its
 * "duration" is a Go duration, not ISO 8601) or is unknown to it and ignored anyway.
 */
const KEPT_FORMATS = new Set(["date-time", "date"]);

/**
 * RE2 inline flags for JavaScript flags that change what a pattern matches (the same for ASCII
 * text; RE2 folds case by Unicode simple folding). zod's JSON Schema prints the source only, so
 * `/abc/i` would otherwise refuse "ABC" at admission. g, y, d, u and v change no match here.
 */
const INLINE_FLAGS = new Set(["i", "m", "s"]);

function flagsBySource(schema: z.core.$ZodType): Map<string, string> {
  const flags = new Map<string, string>();
  for (const check of schema._zod.def.checks ?? []) {
    const pattern = (check._zod.def as { pattern?: unknown }).pattern;
    if (pattern instanceof RegExp) flags.set(pattern.source, pattern.flags);
  }
  return flags;
}

/**
 * What a JavaScript pattern uses that the API server's regular expressions (Go's RE2) lack, if
 * anything. Hand-written: the one RE2 binding for Node is a native addon, too much for a pure
 * core; this covers what zod's own formats use (lookarounds), backreferences and \u escapes. The
 * API server still names anything else when the CRD is applied.
 */
export function re2Lacks(source: string): string | undefined {
  for (let i = 0; i < source.length; i++) {
    const c = source[i];
    if (c === "\\") {
      const next = source[i + 1] ?? "";
      if (/[1-9]/.test(next) || (next === "k" && source[i + 2] === "<")) return "a backreference";
      if (next === "u") return "a \\u escape (RE2 writes \\x{…})";
      i++;
    } else if (c === "[") {
      // A class: "(" and "?" are literal inside it.
      for (i++; i < source.length && source[i] !== "]"; i++) {
        if (source[i] === "\\") {
          if (source[i + 1] === "u") return "a \\u escape (RE2 writes \\x{…})";
          i++;
        }
      }
    } else if (c === "(" && /^\?<?[=!]/.test(source.slice(i + 1, i + 4))) {
      return "a lookaround ((?=, (?!, (?<=, (?<!)";
    }
  }
  return undefined;
}

function patternOf(source: string, flags: string, refuse: Refuse): string {
  const lacks = re2Lacks(source);
  if (lacks) {
    refuse(
      `the pattern /${source}/ uses ${lacks}, which the API server's regular expressions (RE2) do not support; write it in RE2 syntax, or check it in zod only with .refine()`,
    );
  }
  const inline = [...flags].filter((f) => INLINE_FLAGS.has(f)).join("");
  return inline ? `(?${inline})${source}` : source;
}

/** The CRD keywords of a scalar zod schema (its metadata is applied by the caller). */
export function scalarSchema(schema: z.core.$ZodType, io: Io, refuse: Refuse): Json {
  // An empty registry: descriptions and x-kubernetes-* metadata are the caller's to apply.
  const json = z.toJSONSchema(schema, { target: "openapi-3.0", io, metadata: z.registry() }) as Json;
  const flags = flagsBySource(schema);
  const out: Json = {};
  for (const [key, value] of Object.entries(json)) {
    if (key === "const") out.enum = [value];
    else if ((key === "minimum" || key === "maximum") && SAFE_INTEGER_BOUNDS.has(value as number)) continue;
    else if (key === "format") {
      if (KEPT_FORMATS.has(value as string)) out.format = value;
    } else if (key === "contentEncoding")
      continue; // an annotation: zod's pattern checks the encoding
    else if (key === "pattern") out.pattern = patternOf(value as string, flags.get(value as string) ?? "", refuse);
    else if (key === "allOf") {
      // Several patterns; inside allOf a structural schema may not repeat the type.
      out.allOf = (value as Json[]).map((member) => {
        const { type: _type, pattern, ...rest } = member;
        if (typeof pattern !== "string" || Object.keys(rest).length)
          refuse(`zod's JSON Schema of this field combines ${JSON.stringify(member)}, which a CRD cannot express`);
        return { pattern: patternOf(pattern, flags.get(pattern) ?? "", refuse) };
      });
    } else if (KEPT.has(key)) out[key] = value;
    else refuse(`zod's JSON Schema of this field has "${key}", which a CRD cannot express (use a zod refinement instead)`);
  }
  if (out.type === undefined) refuse(`zod gives this field no JSON type (${JSON.stringify(json)}); a CRD field needs one`);
  return out;
}

/** CEL's reserved words: a field so named is `__name__` in a rule (k8s.io/apiserver/pkg/cel/escaping.go). */
const CEL_RESERVED = new Set([
  "true",
  "false",
  "null",
  "in",
  "as",
  "break",
  "const",
  "continue",
  "else",
  "for",
  "function",
  "if",
  "import",
  "let",
  "loop",
  "package",
  "namespace",
  "return",
  "var",
  "void",
  "while",
]);

/**
 * A field's name as a CEL rule of the API server spells it (`self.<name>`), or undefined when it
 * cannot be named (the same escaping as the API server: `__` `.` `-` `/` and reserved words).
 */
export function celFieldName(name: string): string | undefined {
  if (!/^[a-zA-Z_./-][a-zA-Z0-9_./-]*$/.test(name)) return undefined;
  if (CEL_RESERVED.has(name)) return `__${name}__`;
  return name.replace(/__|[./-]/g, (s) => ({ __: "__underscores__", ".": "__dot__", "-": "__dash__", "/": "__slash__" })[s] ?? s);
}
