import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { TimerTurns, TURN_FORGET_MS, TURN_MAX_WEIGHED, TURN_WAIT_MS, type Recorded } from "./timer-turns.ts";

const due =
  (at: string | undefined): (() => Recorded) =>
  () => ({ at, observedGeneration: 1 });

describe("TimerTurns", () => {
  const setup = () => {
    let now = 0;
    const turns = new TimerTurns(() => now);
    return { turns, advance: (ms: number) => (now += ms) };
  };

  it("holds no timer while every announcement is answered within the wait", () => {
    const { turns, advance } = setup();
    turns.sent("a", { at: "t1" });
    advance(TURN_WAIT_MS - 1);
    assert.equal(turns.mustWait("b"), false);
    turns.seen("a", due("t2"));
    advance(10 * TURN_WAIT_MS);
    assert.equal(turns.mustWait("b"), false);
    assert.equal(turns.unanswered, 0);
  });

  it("holds the others' timers once one waits past the limit while a later one was answered, and frees them when it is answered", () => {
    const { turns, advance } = setup();
    turns.sent("late", { at: "t1" });
    advance(1000);
    turns.sent("early", { at: "t1" });
    turns.sent("served", { at: "t1" });
    turns.seen("served", due("t2"));
    advance(TURN_WAIT_MS - 1000);
    assert.equal(turns.mustWait("early"), true);
    assert.equal(turns.mustWait("other"), true);
    assert.equal(turns.mustWait("late"), false, "the one waiting is never held by itself");
    turns.seen("late", due("t1"));
    assert.equal(turns.mustWait("other"), true, "the same due time is no answer");
    turns.seen("late", due(undefined));
    assert.equal(turns.mustWait("other"), false, "answered: the timers go on (the next oldest has waited less)");
  });

  it("holds nothing while nothing is answered: no function runs, so nobody is passed over", () => {
    const { turns, advance } = setup();
    turns.sent("a", { at: "t1" });
    advance(1000);
    turns.sent("b", { at: "t1" });
    advance(TURN_WAIT_MS * 5);
    assert.equal(turns.mustWait("c"), false);
    turns.seen("a", due("t2"));
    assert.equal(turns.mustWait("c"), false, "b was sent after the one answered: not passed over");
  });

  it("a re-sent announcement counts from its own sending", () => {
    const { turns, advance } = setup();
    turns.sent("a", { at: "t1" });
    advance(TURN_WAIT_MS - 1000);
    turns.sent("a", { at: "t2" });
    advance(2000);
    assert.equal(turns.mustWait("b"), false);
  });

  it("forgets an announcement never answered (dead-lettered) and one whose object is gone", () => {
    const { turns, advance } = setup();
    turns.sent("dead", { at: "t1" });
    advance(1);
    turns.sent("served", { at: "t1" });
    turns.seen("served", due("t2"));
    advance(TURN_WAIT_MS);
    assert.equal(turns.mustWait("b"), true);
    advance(TURN_FORGET_MS);
    assert.equal(turns.mustWait("b"), false);
    assert.equal(turns.unanswered, 0);
    turns.sent("deleted", { at: "t1" });
    advance(1);
    turns.sent("served", { at: "t1" });
    turns.seen("served", due("t2"));
    advance(TURN_WAIT_MS);
    assert.equal(turns.mustWait("b"), true);
    turns.gone("deleted");
    assert.equal(turns.mustWait("b"), false);
  });

  it("a change not yet observed is answered when its generation is", () => {
    const { turns, advance } = setup();
    turns.sent("new", { generation: 1 });
    advance(1);
    turns.sent("served", { at: "t1" });
    turns.seen("served", due("t2"));
    advance(TURN_WAIT_MS);
    turns.seen("new", () => ({ at: undefined, observedGeneration: undefined }));
    assert.equal(turns.mustWait("b"), true, "not reconciled yet: the timers wait");
    turns.seen("new", () => ({ at: "t1", observedGeneration: 1 }));
    assert.equal(turns.mustWait("b"), false);
  });

  it("weighs at most TURN_MAX_WEIGHED announcements, the oldest, and forgets as it goes: no function running costs no memory per object", () => {
    const { turns, advance } = setup();
    for (let i = 0; i < TURN_MAX_WEIGHED + 500; i++) turns.sent(`o${i}`, { generation: 1 });
    assert.equal(turns.unanswered, TURN_MAX_WEIGHED);
    advance(TURN_FORGET_MS + 1);
    turns.sent("late", { generation: 1 });
    assert.equal(turns.unanswered, 1, "the forgotten went as the next one came");
  });
});
