import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { z } from "zod";
import { ConfigError } from "../core/config-error.ts";
import { crdSchemaOf } from "./crd-schema.ts";
import { cel, embedded, freeForm, immutable } from "../core/crd-validation.ts";
import { crdOf } from "./crd.ts";
import { defineOperator } from "../core/operator.ts";

type Json = Record<string, unknown>;
const specOf = (shape: z.core.$ZodLooseShape, rules: Parameters<typeof crdSchemaOf>[3] = []) => crdSchemaOf(z.object(shape), "spec", "input", rules);
const field = (schema: z.ZodType): Json => (specOf({ f: schema }).properties as Record<string, Json>).f!;
const refusal = (schema: z.ZodType): string => {
  try {
    field(schema);
  } catch (e) {
    assert.ok(e instanceof ConfigError, `not a ConfigError: ${String(e)}`);
    assert.doesNotMatch(e.message, /\n/, "one line");
    return e.message;
  }
  return assert.fail("not refused");
};

describe("cel(), immutable(), freeForm(), embedded()", () => {
  it("cel() puts the rule on the field, with a message or the API server's other options", () => {
    assert.deepEqual(field(cel(z.number().int(), "self <= 10", "at most 10")), {
      type: "integer",
      "x-kubernetes-validations": [{ rule: "self <= 10", message: "at most 10" }],
    });
    const options = { messageExpression: "'bad: ' + self", reason: "FieldValueForbidden", fieldPath: ".x", optionalOldSelf: true } as const;
    assert.deepEqual(field(cel(z.string(), "self != 'x'", options))["x-kubernetes-validations"], [{ rule: "self != 'x'", ...options }]);
  });

  it("cel() rules add up, keep the description, and survive .optional()", () => {
    const schema = cel(cel(z.string().describe("the name"), "size(self) > 1", "too short"), "self != 'admin'", "reserved").optional();
    assert.deepEqual(field(schema), {
      type: "string",
      description: "the name",
      "x-kubernetes-validations": [
        { rule: "size(self) > 1", message: "too short" },
        { rule: "self != 'admin'", message: "reserved" },
      ],
    });
  });

  it("resource.validations become the spec's own rules", () => {
    const op = defineOperator({
      resource: { group: "example.com", version: "v1", plural: "things", kind: "Thing", validations: [{ rule: "self.min <= self.max", message: "min > max" }] },
      spec: z.object({ min: z.number(), max: z.number() }),
      reconcile: () => ({}),
    });
    const spec = (crdOf(op).spec as { versions: Array<{ schema: { openAPIV3Schema: { properties: { spec: Json } } } }> }).versions[0]!.schema.openAPIV3Schema
      .properties.spec;
    assert.deepEqual(spec["x-kubernetes-validations"], [{ rule: "self.min <= self.max", message: "min > max" }]);
  });

  it("a malformed rule is one line naming where it is", () => {
    assert.equal(refusal(cel(z.string(), " ")), 'spec.f: CEL rule 1 (" "): rule: rule is empty');
    assert.equal(refusal(cel(z.string(), "true", "two\nlines")), 'spec.f: CEL rule 1 ("true"): message: message must be one line');
    assert.throws(() => specOf({}, [{ rule: "true", reason: "Nope" as "FieldValueInvalid" }]), { message: /^spec: CEL rule 1 \("true"\): reason: / });
  });

  it("immutable() on a required field is self == oldSelf, named from the spec down", () => {
    assert.deepEqual(field(immutable(z.string())), { type: "string", "x-kubernetes-validations": [{ rule: "self == oldSelf", message: "f is immutable" }] });
    assert.deepEqual(field(immutable(z.string(), "set once"))["x-kubernetes-validations"], [{ rule: "self == oldSelf", message: "set once" }]);
    assert.equal(specOf({ f: immutable(z.string()) })["x-kubernetes-validations"], undefined, "no presence rule: it is always there");
  });

  it("immutable() on a field that may be absent also freezes its presence, from the nearest field always there", () => {
    const spec = specOf({
      zone: immutable(z.string()).optional(),
      o: z.object({ i: immutable(z.string().optional()), r: immutable(z.string()) }).optional(),
      namespace: immutable(z.string()).optional(),
      "my-field": immutable(z.string()).optional(),
    });
    assert.deepEqual(spec["x-kubernetes-validations"], [
      { rule: "(has(self.zone)) == (has(oldSelf.zone))", message: "zone is immutable: it cannot be added or removed after creation", fieldPath: ".zone" },
      {
        rule: "(has(self.o) && has(self.o.i)) == (has(oldSelf.o) && has(oldSelf.o.i))",
        message: "o.i is immutable: it cannot be added or removed after creation",
        fieldPath: ".o.i",
      },
      { rule: "(has(self.o)) == (has(oldSelf.o))", message: "o.r is immutable: it cannot be added or removed after creation", fieldPath: ".o.r" },
      // CEL's escaping of reserved words and dashes, as the API server spells field names.
      {
        rule: "(has(self.__namespace__)) == (has(oldSelf.__namespace__))",
        message: "namespace is immutable: it cannot be added or removed after creation",
        fieldPath: ".namespace",
      },
      {
        rule: "(has(self.my__dash__field)) == (has(oldSelf.my__dash__field))",
        message: "my-field is immutable: it cannot be added or removed after creation",
        fieldPath: "['my-field']",
      },
    ]);
  });

  it("immutable() inside a list is refused, except in a map list, whose items hold the presence rule", () => {
    assert.match(
      refusal(z.array(z.object({ a: immutable(z.string()) }))),
      /^spec\.f\[\]\.a: the rule "self == oldSelf" reads oldSelf inside a list, where the API server cannot pair an item with its old value/,
    );
    const ports = field(
      z
        .array(z.object({ name: z.string(), port: immutable(z.number().int()).optional() }))
        .meta({ "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"] }),
    );
    assert.equal(ports["x-kubernetes-list-type"], "map");
    assert.deepEqual((ports.items as Json)["x-kubernetes-validations"], [
      { rule: "(has(self.port)) == (has(oldSelf.port))", message: "f[].port is immutable: it cannot be added or removed after creation", fieldPath: ".port" },
    ]);
    assert.match(
      refusal(z.array(z.object({ a: z.string().optional() })).meta({ "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["a"] })),
      /x-kubernetes-list-map-keys must name required fields/,
    );
  });

  it("freeForm() keeps every field, in the CRD and in what zod parses", () => {
    assert.deepEqual(field(freeForm()), { type: "object", "x-kubernetes-preserve-unknown-fields": true });
    const pod = freeForm(z.object({ containers: z.array(freeForm(z.object({ name: z.string() }))) }));
    assert.deepEqual(field(pod), {
      type: "object",
      properties: {
        containers: {
          type: "array",
          items: { type: "object", properties: { name: { type: "string" } }, required: ["name"], "x-kubernetes-preserve-unknown-fields": true },
        },
      },
      required: ["containers"],
      "x-kubernetes-preserve-unknown-fields": true,
    });
    const written = { containers: [{ name: "web", image: "nginx", env: [{ name: "A", value: "1" }] }], hostNetwork: true };
    assert.deepEqual(pod.parse(written), written);
  });

  it("embedded() is any Kubernetes object; a typed one must declare apiVersion and kind", () => {
    const any = field(embedded());
    assert.equal(any["x-kubernetes-embedded-resource"], true);
    assert.equal(any["x-kubernetes-preserve-unknown-fields"], true);
    assert.deepEqual(any.required, ["apiVersion", "kind"]);
    const typed = field(embedded(z.object({ apiVersion: z.literal("v1"), kind: z.literal("ConfigMap"), data: z.record(z.string(), z.string()) })));
    assert.equal(typed["x-kubernetes-embedded-resource"], true);
    assert.equal(typed["x-kubernetes-preserve-unknown-fields"], undefined);
    assert.match(
      refusal(embedded(z.object({ spec: z.string() }))),
      /^spec\.f: an embedded resource \(embedded\(\)\) must be a z\.object declaring apiVersion and kind as required strings/,
    );
  });

  it("checks the x-kubernetes-* metadata it is given, and ignores other tools' metadata", () => {
    assert.match(refusal(z.string().meta({ "x-kubernetes-validation": [] })), /^spec\.f: "x-kubernetes-validation" is not a CRD keyword crdfn knows/);
    assert.match(refusal(z.object({ a: z.string() }).meta({ "x-kubernetes-preserve-unknown-fields": true })), /would keep what zod drops; use freeForm/);
    assert.match(refusal(cel(z.unknown(), "self != null")), /^spec\.f: a CEL rule on a field of any type/);
    assert.deepEqual(field(z.string().meta({ id: "name", examples: ["a"], title: "Name" })), { type: "string", title: "Name" });
  });
});

describe("zod constructs with a CRD equivalent", () => {
  const cases: Array<[string, z.ZodType, Json]> = [
    ["literals of one type → enum", z.union([z.literal("a").describe("the a"), z.literal("b")]), { type: "string", enum: ["a", "b"] }],
    ["z.literal([…]) → enum", z.literal([1, 2]), { type: "number", enum: [1, 2] }],
    ["z.enum → enum", z.enum(["web", "worker"]), { type: "string", enum: ["web", "worker"] }],
    ["a schema or null → nullable", z.union([z.string(), z.null()]), { type: "string", nullable: true }],
    [
      "a nullable enum → the pattern of its values (an enum field refuses null)",
      z.enum(["a.b", "c"]).nullable(),
      { type: "string", pattern: "^(?:a\\.b|c)$", nullable: true },
    ],
    [
      "string or integer → int-or-string, each with its checks",
      z.union([z.string().regex(/^\d+%$/), z.number().int().min(0)]),
      { "x-kubernetes-int-or-string": true, pattern: "^\\d+%$", minimum: 0 },
    ],
    ["z.unknown() → any value, kept", z.unknown(), { "x-kubernetes-preserve-unknown-fields": true }],
    ["z.any() → any value, kept", z.any(), { "x-kubernetes-preserve-unknown-fields": true }],
    ["z.json() → any value, kept", z.json(), { "x-kubernetes-preserve-unknown-fields": true }],
    [
      "z.record(z.string(), z.unknown()) → any object, kept",
      z.record(z.string(), z.unknown()),
      { type: "object", "x-kubernetes-preserve-unknown-fields": true },
    ],
    ["z.record(z.string(), X) → a map", z.record(z.string(), z.number()), { type: "object", additionalProperties: { type: "number" } }],
    [
      "z.record(enum, X) → named, required fields",
      z.record(z.enum(["a", "b"]), z.number()),
      { type: "object", properties: { a: { type: "number" }, b: { type: "number" } }, required: ["a", "b"] },
    ],
    [
      "z.partialRecord(enum, X) → named fields",
      z.partialRecord(z.enum(["a", "b"]), z.number()),
      { type: "object", properties: { a: { type: "number" }, b: { type: "number" } } },
    ],
    [
      "z.looseObject → fields, and the rest kept",
      z.looseObject({ a: z.string() }),
      { type: "object", properties: { a: { type: "string" } }, required: ["a"], "x-kubernetes-preserve-unknown-fields": true },
    ],
    [
      "z.strictObject → fields (the API server drops the rest)",
      z.strictObject({ a: z.string() }),
      { type: "object", properties: { a: { type: "string" } }, required: ["a"] },
    ],
    [
      "z.intersection of objects → one object",
      z.intersection(z.object({ a: z.string() }), z.object({ b: z.number().optional() })),
      { type: "object", properties: { a: { type: "string" }, b: { type: "number" } }, required: ["a"] },
    ],
    [
      "a tuple of one item schema → a list of that length",
      z.tuple([z.string(), z.string()]),
      { type: "array", items: { type: "string" }, minItems: 2, maxItems: 2 },
    ],
    ["a transform → its input", z.string().transform((s) => s.length), { type: "string" }],
    ["a codec → its input", z.codec(z.string().regex(/^\d+$/), z.number(), { decode: Number, encode: String }), { type: "string", pattern: "^\\d+$" }],
    ["a regex's flags → RE2 inline flags", z.string().regex(/^ab$/i), { type: "string", pattern: "(?i)^ab$" }],
    [
      "several patterns → allOf of patterns (no type inside)",
      z.string().startsWith("a").endsWith("z"),
      { type: "string", allOf: [{ pattern: "^a.*" }, { pattern: ".*z$" }] },
    ],
    [
      "z.iso.datetime() keeps format date-time (a timestamp in CEL)",
      z.iso.datetime({ precision: 0 }),
      { type: "string", format: "date-time", pattern: z.toJSONSchema(z.iso.datetime({ precision: 0 })).pattern },
    ],
    ["other formats are dropped: zod's pattern is the check", z.uuid(), { type: "string", pattern: z.toJSONSchema(z.uuid()).pattern }],
    ["z.url() has no pattern: no admission check, zod checks it", z.url(), { type: "string" }],
    ["defaults are the CRD's defaults", z.number().int().default(1), { type: "integer", default: 1 }],
    ["list bounds", z.array(z.string()).min(1).max(3), { type: "array", items: { type: "string" }, minItems: 1, maxItems: 3 }],
  ];
  for (const [name, schema, expected] of cases) {
    it(name, () => assert.deepEqual(field(schema), expected));
  }

  it("z.unknown(), z.any() and defaulted fields are not required; .nonoptional() is", () => {
    const spec = specOf({ a: z.unknown(), b: z.any(), c: z.string().default("x"), d: z.string().optional().nonoptional(), e: z.string().nullable() });
    assert.deepEqual(spec.required, ["d", "e"]);
  });

  it("a discriminated union → one object, the discriminator an enum, and a CEL rule per option's required field", () => {
    const shape = z.discriminatedUnion("kind", [
      z.object({ kind: z.literal("circle"), radius: z.number() }),
      z.object({ kind: z.literal("rect"), width: z.number(), height: z.number().optional() }),
      z.object({ kind: z.literal(["it's", "dot"]), at: z.number() }),
    ]);
    assert.deepEqual(field(shape), {
      type: "object",
      properties: {
        kind: { type: "string", enum: ["circle", "rect", "it's", "dot"] },
        radius: { type: "number" },
        width: { type: "number" },
        height: { type: "number" },
        at: { type: "number" },
      },
      required: ["kind"],
      "x-kubernetes-validations": [
        {
          rule: 'self.kind != "circle" || has(self.radius)',
          message: "radius is required when kind is circle",
          fieldPath: ".radius",
          reason: "FieldValueRequired",
        },
        { rule: 'self.kind != "rect" || has(self.width)', message: "width is required when kind is rect", fieldPath: ".width", reason: "FieldValueRequired" },
        {
          rule: `!(self.kind in ["it's", "dot"]) || has(self.at)`,
          message: "at is required when kind is it's or dot",
          fieldPath: ".at",
          reason: "FieldValueRequired",
        },
      ],
    });
    const numbered = z.discriminatedUnion("v", [z.object({ v: z.literal(1), a: z.string() }), z.object({ v: z.literal(2) })]);
    assert.deepEqual(field(numbered)["x-kubernetes-validations"], [
      { rule: "self.v != 1.0 || has(self.a)", message: "a is required when v is 1", fieldPath: ".a", reason: "FieldValueRequired" },
    ]);
  });

  it("the status schema is the output side: a pipe's output", () => {
    const status = crdSchemaOf(
      z.object({
        n: z
          .string()
          .transform((s) => s.length)
          .pipe(z.number().int()),
      }),
      "status",
      "output",
    );
    assert.deepEqual(status.properties, { n: { type: "integer" } });
  });
});

describe("zod constructs without a CRD equivalent: one line naming the field, the construct and what to use", () => {
  const Tree: z.ZodType = z.lazy(() => z.object({ kids: z.array(Tree) }));
  const cases: Array<[string, z.ZodType, RegExp]> = [
    ["z.date()", z.date(), /^spec\.f: z\.date\(\) has no CRD schema .*; use z\.iso\.datetime\(\)/],
    ["z.bigint()", z.bigint(), /^spec\.f: z\.bigint\(\) has no CRD schema .*; use z\.number\(\)\.int\(\)/],
    ["a union of string and number", z.union([z.string(), z.number()]), /^spec\.f: z\.union\(\) of string and number has no CRD schema .*int-or-string/],
    [
      "a union of objects",
      z.union([z.object({ a: z.string() }), z.object({ b: z.string() })]),
      /^spec\.f: z\.union\(\) of objects has no CRD schema; use z\.discriminatedUnion/,
    ],
    [
      "a discriminated union declaring one field two ways",
      z.discriminatedUnion("k", [z.object({ k: z.literal("a"), x: z.string() }), z.object({ k: z.literal("b"), x: z.number() })]),
      /^spec\.f: the options of this z\.discriminatedUnion\(\) declare "x" differently/,
    ],
    [
      "a default in one option of a discriminated union",
      z.discriminatedUnion("k", [z.object({ k: z.literal("a"), x: z.string().default("x") }), z.object({ k: z.literal("b") })]),
      /^spec\.f: a default on "x", which only some options/,
    ],
    [
      "a CEL rule on one option of a discriminated union",
      z.discriminatedUnion("k", [cel(z.object({ k: z.literal("a") }), "true"), z.object({ k: z.literal("b") })]),
      /^spec\.f: a CEL rule on one option of a z\.discriminatedUnion\(\)/,
    ],
    [
      "an intersection with a non-object",
      z.intersection(z.object({ a: z.string() }), z.string()),
      /^spec\.f: z\.intersection\(\) of anything but two z\.objects has no CRD schema; use A\.extend\(B\.shape\)/,
    ],
    [
      "an intersection declaring one field two ways",
      z.intersection(z.object({ a: z.string() }), z.object({ a: z.number() })),
      /^spec\.f: the two sides of this z\.intersection\(\) declare "a" differently/,
    ],
    [
      "a tuple of different items",
      z.tuple([z.string(), z.number()]),
      /^spec\.f: z\.tuple\(\) with items of different schemas has no CRD schema .*; use an object with named fields/,
    ],
    ["z.transform()", z.transform((x) => x), /^spec\.f: z\.transform\(\) has no CRD schema/],
    ["z.preprocess()", z.preprocess((x) => x, z.string()), /^spec\.f: z\.preprocess\(\) has no CRD schema/],
    ["a recursive z.lazy()", Tree, /^spec\.f\.kids\[\]: a recursive schema \(z\.lazy\) has no CRD schema .*; use z\.unknown\(\)/],
    ["a record with number keys", z.record(z.number(), z.string()), /^spec\.f: z\.record\(\) keys must be a plain z\.string\(\) or an enum of names/],
    ["a record with checked keys", z.record(z.string().min(3), z.string()), /^spec\.f: z\.record\(\) keys must be a plain z\.string\(\)/],
    ["a catchall of a type", z.object({ a: z.string() }).catchall(z.number()), /^spec\.f: z\.object\(\)\.catchall\(\) has no CRD schema .*z\.record/],
    ["z.null()", z.null(), /^spec\.f: z\.null\(\) has no CRD schema on its own .*; use \.nullable\(\)/],
    ["a nullable enum of numbers", z.literal([1, 2]).nullable(), /^spec\.f: a nullable enum of numbers has no CRD schema .*; use \.optional\(\)/],
    ["literals of two types", z.literal(["a", 1]), /^spec\.f: z\.literal\(\) mixing string and number values has no CRD schema/],
    ["an enum of two types", z.enum({ A: 1, B: "b" }), /^spec\.f: z\.enum\(\) mixing number and string values has no CRD schema/],
    ["z.literal(undefined)", z.literal(undefined), /^spec\.f: z\.literal\(undefined\) has no CRD schema .*; use \.optional\(\)/],
    [".catch()", z.string().catch("x"), /^spec\.f: \.catch\(\) has no CRD schema.*; use \.default\(\)/],
    ["z.set()", z.set(z.string()), /^spec\.f: z\.set\(\) has no CRD schema .*; use z\.array/],
    ["z.map()", z.map(z.string(), z.string()), /^spec\.f: z\.map\(\) has no CRD schema .*; use z\.record/],
    ["z.undefined()", z.undefined(), /^spec\.f: z\.undefined\(\) has no CRD schema .*; use \.optional\(\)/],
    ["z.void()", z.void(), /^spec\.f: z\.void\(\) has no CRD schema/],
    ["z.never()", z.never(), /^spec\.f: z\.never\(\) has no CRD schema/],
    ["z.nan()", z.nan(), /^spec\.f: z\.nan\(\) has no CRD schema .*; use z\.number\(\)/],
    ["z.symbol()", z.symbol(), /^spec\.f: z\.symbol\(\) has no CRD schema/],
    ["z.promise()", z.promise(z.string()), /^spec\.f: z\.promise\(\) has no CRD schema/],
    ["z.file()", z.file(), /^spec\.f: z\.file\(\) has no CRD schema; hold the contents as z\.base64\(\)/],
    ["z.custom()", z.custom<string>(), /^spec\.f: z\.custom\(\)\/z\.instanceof\(\) has no CRD schema .*; use a typed schema with \.refine\(\)/],
    ["z.instanceof()", z.instanceof(Date), /^spec\.f: z\.custom\(\)\/z\.instanceof\(\) has no CRD schema/],
    [
      "a pattern with a lookahead (z.hostname())",
      z.hostname(),
      /^spec\.f: the pattern \/.*\/ uses a lookaround .*RE2.*; write it in RE2 syntax, or check it in zod only with \.refine\(\)$/,
    ],
    ["a pattern with a backreference", z.string().regex(/^(a)\1$/), /^spec\.f: the pattern \/\^\(a\)\\1\$\/ uses a backreference/],
  ];
  for (const [name, schema, expected] of cases) {
    it(name, () => assert.match(refusal(schema), expected));
  }

  it("a spec that is not an object", () => {
    assert.throws(() => crdSchemaOf(z.string(), "spec", "input"), { message: /^spec: the spec schema must be a z\.object/ });
  });

  it("crdOf, crdfn crd and crdfn generate report it as one ConfigError line naming the CRD", () => {
    const op = defineOperator({
      resource: { group: "example.com", version: "v1", plural: "things", kind: "Thing" },
      spec: z.object({ at: z.object({ when: z.date() }) }),
      reconcile: () => ({}),
    });
    assert.throws(
      () => crdOf(op),
      (e) => e instanceof ConfigError && /^CRD things\.example\.com: spec\.at\.when: z\.date\(\) has no CRD schema [^\n]*$/.test(e.message),
    );
  });
});
