import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { pino } from "pino";
import { backoffMs } from "../../core/backoff.ts";
import { createCircuit, report } from "./circuit.ts";

describe("outage circuit", () => {
  it("opens on the first infrastructure failure, lets one probe through when the period ends, and backs off while probes fail", () => {
    let t = 0;
    const c = createCircuit({ clock: () => new Date(t), logger: pino({ level: "silent" }), baseMs: 1000, maxMs: 4000 });
    assert.equal(c.admit(), "closed");
    c.failed("ECONNREFUSED");
    assert.ok(c.isOpen());
    assert.equal(typeof c.admit(), "number", "no work while open");
    t += 1300;
    assert.equal(c.admit(), "probe");
    assert.equal(typeof c.admit(), "number", "one probe at a time");
    c.failed("ECONNREFUSED");
    t += 1500; // below 2000 ms less its 20 % jitter
    assert.equal(typeof c.admit(), "number", "the open period doubled");
    t += 10_000;
    assert.equal(c.admit(), "probe");
    c.release();
    assert.equal(c.admit(), "probe", "a probe that found no message lets another probe");
    c.succeeded();
    assert.equal(c.admit(), "closed");
    assert.ok(!c.isOpen());
  });

  it("defers for a bounded time and backs ordinary retries off exponentially", () => {
    const c = createCircuit({ clock: () => new Date(0), logger: pino({ level: "silent" }) });
    c.failed("down");
    const d = c.deferSeconds();
    assert.ok(d >= 2 && d <= 24, `deferred ${d}s`);
    assert.deepEqual(
      [1, 2, 3, 4, 5, 12].map((n) => backoffMs(n, { initialMs: 30, maxMs: 900 })),
      [30, 60, 120, 240, 480, 900],
    );
  });
});

describe("what the circuit learns from an outcome", () => {
  it("only work that reached the API server closes it", () => {
    let t = 0;
    const c = createCircuit({ clock: () => new Date(t), logger: pino({ level: "silent" }), baseMs: 1000 });
    c.failed("down");
    t += 5000;
    assert.equal(c.admit(), "probe");
    report(c, { result: "success", detail: "not due yet; re-sent", apiCalls: 0 });
    assert.ok(c.isOpen(), "a re-sent early message proves nothing");
    assert.equal(c.admit(), "probe", "so another may probe");
    report(c, { result: "success", apiCalls: 2 });
    assert.ok(!c.isOpen());
  });
});
