import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { missingBuildTools } from "./lambda-ric.ts";

describe("aws-lambda-ric's build tools", () => {
  it("names nothing when every tool is there, an alternative name counting", () => {
    const present = new Set(["cmake3", "make", "gcc", "g++", "python3", "xz"]);
    assert.deepEqual(
      missingBuildTools({}, (c) => present.has(c)),
      [],
    );
  });

  it("names each missing tool by the Debian package that brings it", () => {
    assert.deepEqual(
      missingBuildTools({}, (c) => c === "make" || c === "python3"),
      ["cmake", "gcc", "g++", "xz-utils"],
    );
  });
});
