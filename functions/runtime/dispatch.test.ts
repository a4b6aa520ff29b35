import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { encodeKeyEvent } from "../../core/event.ts";
import crontab from "../../examples/crontab/operator.ts";
import greeting from "../../examples/greeting/operator.ts";
import { dispatchByResource } from "./dispatch.ts";
import type { Runtime } from "./runtime.ts";

const tagged = (tag: string): Runtime => ({ handle: () => Promise.resolve({ result: "success", detail: tag, apiCalls: 0 }) });
const event = (group: string, plural: string) =>
  encodeKeyEvent({ v: 1, cluster: "c", group, version: "v1", plural, kind: "K", namespace: "default", name: "n", uid: "u", resourceVersion: "1", generation: 1, type: "ADDED", observedAt: "2026-11-21T00:00:00Z" });

describe("dispatchByResource", () => {
  it("routes each event to its resource's runtime; the rest to the first, which dead-letters them", async () => {
    const runtime = dispatchByResource([{ operator: greeting, runtime: tagged("greeting") }, { operator: crontab, runtime: tagged("crontab") }]);
    assert.equal((await runtime.handle({ id: "1", body: event("stable.example.com", "crontabs") })).detail, "crontab");
    assert.equal((await runtime.handle({ id: "2", body: event("example.com", "greetings") })).detail, "greeting");
    assert.equal((await runtime.handle({ id: "3", body: "nonsense" })).detail, "greeting");
  });
});
