import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { pino } from "pino";
import { processBatch } from "./poller.ts";

const msg = (id: string, group: string) => ({ MessageId: id, Body: id, Attributes: { MessageGroupId: group } });

describe("batch processing", () => {
  it("FIFO: groups in order; after a group's first failure the rest of that group is not attempted but superseded", async () => {
    const seen: string[] = [];
    const runtime = {
      handle: (m: { body: string }) => {
        seen.push(m.body);
        return Promise.resolve(m.body === "a2" ? { result: "retry" as const, detail: "boom" } : { result: "success" as const });
      },
    };
    const outcomes = await processBatch([msg("a1", "A"), msg("b1", "B"), msg("a2", "A"), msg("a3", "A"), msg("b2", "B")], true, runtime, pino({ level: "silent" }));
    assert.deepEqual([...outcomes].map(([id, o]) => [id, o.result]).sort(), [["a1", "success"], ["a2", "retry"], ["a3", "success"], ["b1", "success"], ["b2", "success"]]);
    assert.ok(!seen.includes("a3"), "a3 was never handed to the runtime");
    assert.match(outcomes.get("a3")?.detail ?? "", /superseded/, "a3 is deleted: a2's retry reconciles the object's current state");
    assert.ok(seen.indexOf("a1") < seen.indexOf("a2"));
  });

  it("FIFO: a malformed message does not hold back the rest of its group", async () => {
    const runtime = { handle: (m: { body: string }) => Promise.resolve(m.body === "x" ? { result: "dead-letter" as const, detail: "bad" } : { result: "success" as const }) };
    const outcomes = await processBatch([msg("x", "G"), msg("y", "G")], true, runtime, pino({ level: "silent" }));
    assert.deepEqual([outcomes.get("x")?.result, outcomes.get("y")?.result], ["dead-letter", "success"]);
  });

  it("standard queue: one failure does not hold back the others", async () => {
    const runtime = { handle: (m: { body: string }) => Promise.resolve(m.body === "x" ? { result: "dead-letter" as const, detail: "bad" } : { result: "success" as const }) };
    const outcomes = await processBatch([msg("x", "G"), msg("y", "G")], false, runtime, pino({ level: "silent" }));
    assert.equal(outcomes.get("y")?.result, "success");
  });
});

describe("batch processing with the outage circuit", () => {
  it("defers the rest of a batch once the circuit opens, but tries the probe", async () => {
    const { createCircuits } = await import("./outage.ts");
    let t = 0;
    const circuits = createCircuits({ clock: () => new Date(t), logger: pino({ level: "silent" }) });
    const down = { handle: () => Promise.resolve({ result: "unavailable" as const, detail: "ECONNREFUSED", apiCalls: 1 }) };
    const outcomes = await processBatch([msg("a1", "A"), msg("a2", "A"), msg("b1", "B")], true, down, pino({ level: "silent" }), circuits);
    assert.ok([...outcomes.values()].every((o) => o.result === "unavailable"));
    assert.ok(circuits.waitMs() > 0, "the only cluster is down: receiving pauses");
    t += 60_000;
    let tried = 0;
    const up = { handle: () => (tried++, Promise.resolve({ result: "success" as const, apiCalls: 1 })) };
    const probe = await processBatch([msg("c1", "C"), msg("c2", "D")], true, up, pino({ level: "silent" }), circuits);
    assert.equal(probe.get("c1")?.result, "success");
    assert.equal(probe.get("c2")?.result, "unavailable", "one probe at a time");
    assert.equal(tried, 1);
    assert.equal(circuits.waitMs(), 0, "a successful probe closes the circuit");
  });

  it("keeps one cluster's outage from holding back another cluster's messages", async () => {
    const { createCircuits } = await import("./outage.ts");
    const circuits = createCircuits({ clock: () => new Date(0), logger: pino({ level: "silent" }) });
    const event = (cluster: string, name: string) =>
      JSON.stringify({ v: 1, cluster, group: "example.com", version: "v1", plural: "greetings", kind: "Greeting", namespace: "default", name, uid: "u", resourceVersion: "1", generation: 1, type: "MODIFIED", observedAt: new Date(0).toISOString() });
    const m = (id: string, cluster: string) => ({ MessageId: id, Body: event(cluster, id), Attributes: { MessageGroupId: id } });
    const runtime = { handle: (q: { body: string }) => Promise.resolve(q.body.includes('"cluster":"b"') ? { result: "unavailable" as const, detail: "ECONNREFUSED", apiCalls: 1 } : { result: "success" as const, apiCalls: 1 }) };
    await processBatch([m("b1", "b")], true, runtime, pino({ level: "silent" }), circuits);
    const next = await processBatch([m("a1", "a"), m("b2", "b")], true, runtime, pino({ level: "silent" }), circuits);
    assert.deepEqual([next.get("a1")?.result, next.get("b2")?.result], ["success", "unavailable"]);
    assert.equal(circuits.waitMs(), 0, "cluster a is up: receiving goes on");
  });
});
