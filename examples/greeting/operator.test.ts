import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { reconcileContext, testObject } from "crdfn/testing";
import greeting, { greetingSpec } from "./operator.ts";

const object = (message: string) => testObject(greeting, { metadata: { name: "hi" }, spec: { message } });

describe("Greeting reconcile", () => {
  it("wants a ConfigMap holding the message and phase Ready", () => {
    const result = greeting.reconcile(object("hello"), reconcileContext(greeting));
    assert.deepEqual(result.children?.[0]?.data, { message: "hello" });
    assert.equal(result.children?.[0]?.metadata.name, "hi-greeting");
    assert.deepEqual(result.status, { phase: "Ready" });
  });

  it("rejects padded messages, which the CRD schema lets through", () => {
    assert.equal(greetingSpec.safeParse({ message: " hello" }).success, false);
    assert.equal(greetingSpec.safeParse({ message: "hello" }).success, true);
  });
});
