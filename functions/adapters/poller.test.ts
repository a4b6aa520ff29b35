import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { pino } from "pino";
import { processBatch } from "./poller.ts";

const msg = (id: string, group: string) => ({ MessageId: id, Body: id, Attributes: { MessageGroupId: group } });

describe("batch processing", () => {
  it("FIFO: groups in order; after a group's first failure the rest of that group is not attempted", async () => {
    const seen: string[] = [];
    const runtime = {
      handle: (m: { body: string }) => {
        seen.push(m.body);
        return Promise.resolve(m.body === "a2" ? { result: "retry" as const, detail: "boom" } : { result: "success" as const });
      },
    };
    const outcomes = await processBatch([msg("a1", "A"), msg("b1", "B"), msg("a2", "A"), msg("a3", "A"), msg("b2", "B")], true, runtime, pino({ level: "silent" }));
    assert.deepEqual([...outcomes].map(([id, o]) => [id, o.result]).sort(), [["a1", "success"], ["a2", "retry"], ["a3", "retry"], ["b1", "success"], ["b2", "success"]]);
    assert.ok(!seen.includes("a3"), "a3 was never handed to the runtime");
    assert.ok(seen.indexOf("a1") < seen.indexOf("a2"));
  });

  it("standard queue: one failure does not hold back the others", async () => {
    const runtime = { handle: (m: { body: string }) => Promise.resolve(m.body === "x" ? { result: "dead-letter" as const, detail: "bad" } : { result: "success" as const }) };
    const outcomes = await processBatch([msg("x", "G"), msg("y", "G")], false, runtime, pino({ level: "silent" }));
    assert.equal(outcomes.get("y")?.result, "success");
  });
});
