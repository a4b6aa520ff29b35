import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { SEND_BURST, SendCredit } from "./send-credit.ts";

/** Sends one change per `gapMs` for `n` changes, each as soon as its credit allows; the waits. */
function stream(credit: SendCredit, gapMs: number, n: number): number[] {
  const waits: number[] = [];
  let free = 0;
  for (let i = 0; i < n; i++) {
    const arrives = i * gapMs;
    const goes = Math.max(arrives, free, credit.dueAt(Math.max(arrives, free)));
    credit.spend(goes);
    free = goes;
    waits.push(goes - arrives);
  }
  return waits;
}

describe("send credit", () => {
  it("a burst goes at once after a quiet spell, then one send per interval", () => {
    const credit = new SendCredit(40);
    for (let i = 0; i < SEND_BURST; i++) {
      assert.equal(credit.dueAt(0), 0);
      credit.spend(0);
    }
    assert.equal(credit.dueAt(0), 40);
    assert.equal(credit.dueAt(30), 40);
    credit.spend(40);
    assert.equal(credit.dueAt(40), 80);
    assert.equal(credit.dueAt(1000), 1000, "a quiet second refills it");
  });

  it("a stream at the interval's rate or slower never waits; a faster one is held to it", () => {
    assert.deepEqual(new Set(stream(new SendCredit(40), 40, 100)), new Set([0]));
    assert.deepEqual(new Set(stream(new SendCredit(40), 55, 100)), new Set([0]));
    const fast = stream(new SendCredit(40), 20, 100);
    assert.ok(
      fast.slice(-10).every((w) => w > 0),
      "at twice the rate, changes wait for their turn",
    );
  });

  it("a new pace keeps what was earned and refills at the new rate from then on", () => {
    const credit = new SendCredit(40);
    for (let i = 0; i < SEND_BURST; i++) credit.spend(0);
    assert.equal(credit.pace(20, 250), true, "half a token earned at 40 ms");
    assert.equal(credit.dueAt(20), 20 + 125, "the other half at 250 ms a token");
    assert.equal(credit.pace(20, 250), false, "the same pace changes nothing");
    assert.equal(credit.pace(145, 40), true);
    assert.equal(credit.dueAt(145), 145);
  });

  it("0 never holds anything", () => {
    const credit = new SendCredit(0);
    for (let i = 0; i < 100; i++) {
      assert.equal(credit.dueAt(5), 5);
      credit.spend(5);
    }
  });
});
