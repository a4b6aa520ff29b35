import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { z } from "zod";
import { ConfigError, parseSettings, zodLine } from "./config-error.ts";

const errorOf = (schema: z.ZodType, value: unknown): z.ZodError => {
  const parsed = schema.safeParse(value);
  assert.ok(!parsed.success);
  return parsed.error;
};

describe("a zod error as one line", () => {
  const spec = z.object({ message: z.string().min(1), replicas: z.number().int() });

  it("names every issue by its path, on one line", () => {
    const line = zodLine(errorOf(spec, { message: "", replicas: 1.5 }), { under: "spec" });
    assert.match(line, /^spec\.message: .+; spec\.replicas: .+$/);
    assert.ok(!line.includes("\n"));
  });

  it("the first issue only, and the root named when the whole value is wrong", () => {
    assert.match(zodLine(errorOf(spec, { message: "", replicas: 1.5 }), { first: true }), /^message: [^;]+$/);
    assert.match(zodLine(errorOf(spec, "text"), { root: "options" }), /^options: /);
    assert.doesNotMatch(zodLine(errorOf(z.string(), 1)), /: .*: /, "no path, no root: the message alone");
  });

  it("a record's refused key gives its own reason, under the name the caller gives it", () => {
    const registry = z.record(z.string().regex(/^[a-z]+$/, "lowercase letters only"), z.object({ server: z.url() }));
    assert.equal(zodLine(errorOf(registry, { "No/Slash": { server: "https://a" } }), { first: true, named: 1 }), "lowercase letters only");
    assert.match(zodLine(errorOf(registry, { a: { server: "not a url" } }), { first: true, named: 1 }), /^server: /);
  });

  it("settings: the parsed value, or a ConfigError naming the first bad setting", () => {
    const env = z.object({ CRDFN_PORT: z.coerce.number().int() });
    assert.deepEqual(parseSettings(env, { CRDFN_PORT: "8080" }, "invalid setting "), { CRDFN_PORT: 8080 });
    assert.throws(
      () => parseSettings(env, { CRDFN_PORT: "x" }, "invalid setting "),
      (e: Error) => e instanceof ConfigError && /^invalid setting CRDFN_PORT: /.test(e.message) && e.stack === `ConfigError: ${e.message}`,
    );
  });
});
