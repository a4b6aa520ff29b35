import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { assemble, objectContains, objectIs, waterfall } from "./traces.ts";

const T = "a".repeat(32);
const A = "b".repeat(32);
const span = (
  traceID: string,
  spanID: string,
  operationName: string,
  startMs: number,
  durMs: number,
  processID: string,
  refs: Array<[string, string, string]> = [],
  tags = {},
) => ({
  traceID,
  spanID,
  operationName,
  startTime: startMs * 1000,
  duration: durMs * 1000,
  processID,
  references: refs.map(([refType, traceID, spanID]) => ({ refType: refType as "CHILD_OF" | "FOLLOWS_FROM", traceID, spanID })),
  tags: Object.entries(tags).map(([key, value]) => ({ key, value })),
});

const change = {
  traceID: T,
  processes: { p1: { serviceName: "crdfn-bridge" }, p2: { serviceName: "crdfn-greeting" } },
  spans: [
    span(T, "03", "function handle", 1010, 30, "p2", [["CHILD_OF", T, "01"]]),
    span(T, "01", "bridge change", 1000, 12, "p1", [], {
      "crdfn.object": "example.com/greetings/default/hello-world",
      "crdfn.cause": "watch",
      "crdfn.outcome": "sent",
    }),
    span(T, "04", "kube PUT greetings", 1030, 8, "p2", [["CHILD_OF", T, "03"]]),
    span(T, "02", "bridge hold", 1000, 5, "p1", [["CHILD_OF", T, "01"]]),
    // Steps that start in the same millisecond, in the order they run, whatever Jaeger's.
    span(T, "07", "function write", 1012, 1, "p2", [["CHILD_OF", T, "03"]]),
    span(T, "06", "reconcile", 1012, 0, "p2", [["CHILD_OF", T, "03"]]),
    span(T, "05", "function read", 1012, 0, "p2", [["CHILD_OF", T, "03"]]),
  ],
};
const apiserver = {
  traceID: A,
  processes: { p1: { serviceName: "apiserver" } },
  spans: [
    span(A, "11", "PUT /apis/example.com/v1/namespaces/{:namespace}/greetings/{:name}/status", 1031, 6, "p1", [["FOLLOWS_FROM", T, "04"]]),
    span(A, "12", "Update", 1032, 4, "p1", [["CHILD_OF", A, "11"]]),
  ],
};

describe("a change's trace, assembled", () => {
  const c = assemble(change, [apiserver]);

  it("nests spans by parent, depth first, siblings by start; the API server's trace under the span it links to", () => {
    assert.deepEqual(
      c.spans.map((s) => [s.depth, s.service, s.name, s.linked]),
      [
        [0, "crdfn-bridge", "bridge change", false],
        [1, "crdfn-bridge", "bridge hold", false],
        [1, "crdfn-greeting", "function handle", false],
        [2, "crdfn-greeting", "function read", false],
        [2, "crdfn-greeting", "reconcile", false],
        [2, "crdfn-greeting", "function write", false],
        [2, "crdfn-greeting", "kube PUT greetings", false],
        [3, "apiserver", "PUT /apis/example.com/v1/namespaces/{:namespace}/greetings/{:name}/status", true],
        [4, "apiserver", "Update", false],
      ],
    );
    assert.equal(c.object, "example.com/greetings/default/hello-world");
    assert.equal(c.durationUs, 40_000);
  });

  it("says when the bridge did not send the change (a hold withdrawn)", () => {
    const held = {
      ...change,
      spans: [span(T, "01", "bridge change", 1000, 5, "p1", [], { "crdfn.object": "g/p/n/x", "crdfn.cause": "child", "crdfn.outcome": "withdrawn" })],
    };
    assert.match(waterfall(assemble(held, []))[0]!, /g\/p\/n\/x {2}\(child, withdrawn\) 5\.0 ms/);
  });

  it("prints a line per span: offset, duration, a bar, indented service and name", () => {
    const lines = waterfall(c, 20);
    assert.match(lines[0]!, /example\.com\/greetings\/default\/hello-world {2}\(watch\) 40\.0 ms {2}trace a{32}$/);
    assert.equal(lines[1], `     0.0     12.0  |██████              |  crdfn-bridge: bridge change`);
    assert.equal(
      lines[8],
      `    31.0      6.0  |               ███  |        ↪ apiserver: PUT /apis/example.com/v1/namespaces/{:namespace}/greetings/{:name}/status`,
    );
  });

  it("finds an object by KIND/NAME as a person types the kind, or by text in its key", () => {
    const key = "example.com/greetings/default/hello-world";
    for (const kind of ["greeting", "greetings", "Greeting", "greeting.example.com"]) assert.ok(objectIs(kind, "hello-world")(key), kind);
    assert.ok(objectIs("greeting", "hello-world", "default")(key));
    assert.ok(!objectIs("greeting", "hello-world", "other")(key));
    assert.ok(!objectIs("greeting", "hello")(key));
    assert.ok(!objectIs("crontab", "hello-world")(key));
    assert.ok(!objectIs("greeting.other.io", "hello-world")(key));
    assert.ok(objectIs("policy", "p")("x.io/policies/ns/p"));
    assert.ok(objectContains("HELLO")(key));
    assert.ok(objectContains("")(key));
  });
});
