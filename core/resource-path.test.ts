import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { groupVersionPath, resourcePath } from "./resource-path.ts";

describe("resourcePath", () => {
  it("addresses the core group under /api and named groups under /apis", () => {
    assert.equal(groupVersionPath({ group: "", version: "v1" }), "/api/v1");
    assert.equal(resourcePath({ group: "", version: "v1", plural: "configmaps", namespace: "ns", name: "a" }), "/api/v1/namespaces/ns/configmaps/a");
    assert.equal(resourcePath({ group: "example.com", version: "v1", plural: "greetings" }), "/apis/example.com/v1/greetings");
    assert.equal(
      resourcePath({ group: "example.com", version: "v1", plural: "greetings", namespace: "ns", name: "g" }, "status"),
      "/apis/example.com/v1/namespaces/ns/greetings/g/status",
    );
  });

  it("URL-encodes every segment", () => {
    assert.equal(resourcePath({ group: "g", version: "v1", plural: "things", namespace: "a/b", name: "x?y" }), "/apis/g/v1/namespaces/a%2Fb/things/x%3Fy");
  });
});
