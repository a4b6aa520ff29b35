import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { encodeKeyEvent } from "../../core/event.ts";
import crontab from "../../examples/crontab/operator.ts";
import greeting from "../../examples/greeting/operator.ts";
import { pino } from "pino";
import { dispatchByCluster, dispatchByResource } from "./dispatch.ts";
import type { Runtime } from "./runtime.ts";

const tagged = (tag: string): Runtime => ({ handle: () => Promise.resolve({ result: "success", detail: tag, apiCalls: 0 }) });
const event = (group: string, plural: string, cluster = "c") =>
  encodeKeyEvent({ v: 1, cluster, group, version: "v1", plural, kind: "K", namespace: "default", name: "n", uid: "u", resourceVersion: "1", generation: 1, type: "ADDED", observedAt: "2026-11-21T00:00:00Z" });

describe("dispatchByResource", () => {
  it("routes each event to its resource's runtime; a malformed one or one for a resource nobody serves is dead-lettered with a line naming what is served", async () => {
    const lines: Array<Record<string, unknown>> = [];
    const logger = pino({ level: "info" }, { write: (l: string) => void lines.push(JSON.parse(l) as Record<string, unknown>) });
    const runtime = dispatchByResource([{ operator: greeting, runtime: tagged("greeting") }, { operator: crontab, runtime: tagged("crontab") }], logger);
    assert.equal((await runtime.handle({ id: "1", body: event("stable.example.com", "crontabs") })).detail, "crontab");
    assert.equal((await runtime.handle({ id: "2", body: event("example.com", "greetings") })).detail, "greeting");
    assert.equal((await runtime.handle({ id: "3", body: "nonsense" })).result, "dead-letter");
    assert.equal((await runtime.handle({ id: "4", body: event("other.example.com", "widgets") })).result, "dead-letter");
    const unknown = lines.find((l) => l.resource === "widgets.other.example.com");
    assert.deepEqual(unknown?.served, ["greetings.example.com", "crontabs.stable.example.com"]);
    assert.equal(unknown?.operator, undefined, "no operator of the host is named as if it were the one");
  });
});

describe("dispatchByCluster", () => {
  it("routes each event to its cluster's runtime, built once on its first event", async () => {
    const builds: string[] = [];
    const runtime = dispatchByCluster(["a", "b"], (c) => (builds.push(c), tagged(c)), pino({ level: "silent" }));
    assert.deepEqual(builds, [], "nothing built before an event needs it");
    assert.equal((await runtime.handle({ id: "1", body: event("example.com", "greetings", "b") })).detail, "b");
    assert.equal((await runtime.handle({ id: "2", body: event("example.com", "greetings", "a") })).detail, "a");
    assert.equal((await runtime.handle({ id: "3", body: event("example.com", "greetings", "b") })).detail, "b");
    assert.deepEqual(builds, ["b", "a"]);
    assert.equal((await runtime.handle({ id: "4", body: "nonsense" })).detail, "a", "malformed: the first cluster's runtime dead-letters it");
  });

  it("dead-letters an event for a cluster not in the registry, with one log line naming it", async () => {
    const lines: Array<Record<string, unknown>> = [];
    const logger = pino({ level: "info" }, { write: (l: string) => void lines.push(JSON.parse(l) as Record<string, unknown>) });
    const runtime = dispatchByCluster(["a"], (c) => tagged(c), logger);
    for (const receiveCount of [1, 2, 3]) {
      const outcome = await runtime.handle({ id: "x", body: event("example.com", "greetings", "c"), receiveCount });
      assert.equal(outcome.result, "dead-letter");
    }
    assert.equal(lines.length, 1);
    assert.equal(lines[0]?.cluster, "c");
    assert.match(String(lines[0]?.msg), /cluster "c", which is not in the registry/);
  });
});
