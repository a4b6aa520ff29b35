// JSON in one spelling per value: object keys sorted, undefined members dropped. The API server
// may reorder keys, and a hash must not depend on insertion order.
//
// Built by appending to one string, and strings that need no escaping quoted directly: the
// bridge spells every object it fingerprints and every event it signs, and mapping entries into
// arrays to join them, with JSON.stringify on every key, took twice as long (12 against 25 µs
// for a Greeting's event) and made most of the bridge's garbage (bench:coldscale --cpu-prof). The
// spelling is the same byte for byte (canonical-json.test.ts holds the plain definition), since
// a MAC made by one version must verify in another (core/event-auth.ts).

/** What JSON.stringify escapes in a string: quote, backslash, control characters, and (being well-formed) lone surrogates. */
const NEEDS_ESCAPE = /["\\\u0000-\u001f\ud800-\udfff]/;
const quoted = (s: string): string => (NEEDS_ESCAPE.test(s) ? JSON.stringify(s) : `"${s}"`);

export function canonicalJson(value: unknown): string {
  if (typeof value === "string") return quoted(value);
  if (typeof value !== "object" || value === null) return JSON.stringify(value);
  if (Array.isArray(value)) {
    let out = "[";
    for (let i = 0; i < value.length; i++) {
      if (i > 0) out += ",";
      // An undefined element (no parsed JSON has one) is spelled as nothing, as Array.join does.
      out += canonicalJson(value[i]) ?? "";
    }
    return `${out}]`;
  }
  const record = value as Record<string, unknown>;
  let out = "{";
  for (const key of Object.keys(record).sort()) {
    const member = record[key];
    if (member === undefined) continue;
    if (out.length > 1) out += ",";
    out += `${quoted(key)}:${canonicalJson(member)}`;
  }
  return `${out}}`;
}

/** Order-insensitive deep equality of JSON values. */
export function sameJson(a: unknown, b: unknown): boolean {
  return canonicalJson(a) === canonicalJson(b);
}
