import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { microTime } from "./micro-time.ts";

describe("microTime", () => {
  it("writes six fractional digits, as the API server's MicroTime requires", () => {
    assert.equal(microTime(new Date("2026-01-02T03:04:05.678Z")), "2026-01-02T03:04:05.678000Z");
    assert.equal(microTime(new Date(0)), "1970-01-01T00:00:00.000000Z");
  });
});
