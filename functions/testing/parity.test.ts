// The testing kit decides as the runtime does: the same object given to a unit test's path
// (testObject, reconcileContext(operator), reconcile) and to the runtime's (reconcileWithRuntime)
// gets the same verdict. test/testing-kit.test.ts holds both to a real API server.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { cases, foreignSecret, verdictOfCall, verdictOfRun, widget, type CaseName } from "../../test/support/kit-parity.ts";
import { reconcileContext, reconcileWithRuntime, testObject, type ObjectInput } from "./index.ts";

const inputOf = (name: string, c: (typeof cases)[CaseName]): ObjectInput<typeof c.spec> => ({ metadata: { name }, spec: c.spec });

describe("the testing kit and the runtime give the same verdict", () => {
  for (const [i, [what, c]] of Object.entries(cases).entries()) {
    it(what, async () => {
      const input = inputOf(`w${i}`, c);
      const run = await reconcileWithRuntime(widget, input, { objects: "foreignSecret" in c ? [foreignSecret(input.metadata.name)] : [] });
      const runtime = verdictOfRun(run.object, run.children);
      if ("foreignSecret" in c) {
        // Only an API server knows whose a child is: reconcile itself cannot see it.
        assert.deepEqual(runtime, {
          verdict: "failed",
          reason: "ChildConflict",
          message: "crdfn: the widget function may change or delete secrets w4-secret only if that Widget already controls it",
        });
        return;
      }
      const unit = verdictOfCall(() => widget.reconcile(testObject(widget, input), reconcileContext(widget)));
      assert.deepEqual(unit, runtime);
    });
  }

  it("reads children of an observed kind as the runtime gives them", async () => {
    const first = await reconcileWithRuntime(widget, inputOf("w", cases["an observed kind"]));
    const again = await reconcileWithRuntime(widget, inputOf("w", cases["an observed kind"]), { kube: first.kube });
    const configMaps = Object.fromEntries(first.children.filter((c) => c.kind === "ConfigMap").map((c) => [c.metadata.name, c]));
    const unit = verdictOfCall(() =>
      widget.reconcile(testObject(widget, inputOf("w", cases["an observed kind"])), reconcileContext(widget, { children: { ConfigMap: configMaps } })),
    );
    assert.deepEqual(unit, verdictOfRun(again.object, again.children));
    assert.deepEqual(unit.verdict === "reconciled" && unit.status, { configMaps: 1 });
  });

  it("refuses, as the runtime never gives them, children of a kind the operator does not observe", () => {
    assert.throws(() => reconcileContext(widget, { children: { Secret: {} } }), /Secret, which Widget does not observe/);
    assert.throws(() => reconcileContext(widget).references.of("Secret"), /ctx\.references\.of\("Secret"\): Secret is not declared in reads/);
  });

  it("has one form: the operator first, so that no kind answers that the runtime never gives", () => {
    assert.deepEqual(reconcileContext(widget, { children: { ConfigMap: {} } }).children.of("ConfigMap"), {});
    // As plain JavaScript may call it.
    const untyped = reconcileContext as unknown as (opts: object) => unknown;
    assert.throws(
      () => untyped({ children: { ConfigMap: {} } }),
      /^Error: reconcileContext\(operator, \{ now, children, references \}\): pass the operator first/,
    );
  });

  it("takes one object shape in testObject and reconcileWithRuntime, and testObject's first shape still", async () => {
    const input = { metadata: { name: "shaped", labels: { team: "a" } }, spec: { size: 1, label: "one" } };
    assert.deepEqual(testObject(widget, { name: "shaped", labels: { team: "a" }, spec: { size: 1, label: "one" } }), testObject(widget, input));
    const run = await reconcileWithRuntime(widget, testObject(widget, input));
    assert.equal(run.outcome.result, "success");
    assert.deepEqual(run.object?.metadata.labels, { team: "a" });
  });
});
