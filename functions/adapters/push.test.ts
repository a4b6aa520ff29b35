import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { pino } from "pino";
import type { QueueMessage } from "../runtime/delivery.ts";
import { fakeRuntime } from "../../test/support/fake-runtime.ts";
import type { Outcome } from "../runtime/outcome.ts";
import { DEFERRALS_ATTRIBUTE, DEFERRED_SINCE_ATTRIBUTE } from "./settle.ts";
import { createCircuits } from "./circuit.ts";
import { answerPush, type PushHost } from "./push.ts";
import type { Republish } from "./pubsub-republish.ts";

const logger = pino({ level: "silent" });
const clock = () => new Date(1_000_000);
const message = (receiveCount: number): QueueMessage => ({ id: "m", body: "{}", receiveCount, attributes: { a: "1" }, stream: "greetings.default.x~abc" });

/** A host whose runtime answers `outcome` (having reached the API server, or not). */
function host(outcome: Outcome, republish?: Republish): PushHost {
  return {
    runtime: fakeRuntime(() => ({ ...outcome, apiCalls: outcome.result === "unavailable" ? 0 : 1 })),
    logger,
    clock,
    circuits: createCircuits({ clock, logger }),
    settings: { CRDFN_MAX_DELIVERY_ATTEMPTS: 5, CRDFN_RETRY_MIN_BACKOFF_SECONDS: 5, CRDFN_RETRY_MAX_BACKOFF_SECONDS: 600 },
    ...(republish ? { republish } : {}),
  };
}

/** What matters of an answer: the status, the outcome's result, the settlement. */
const brief = async (a: ReturnType<typeof answerPush>) => (({ status, outcome, action }) => ({ status, result: outcome.result, action }))(await a);

function recorder(fail = false): Republish & { sent: Array<Parameters<Republish>[0]> } {
  const sent: Array<Parameters<Republish>[0]> = [];
  const fn = (m: Parameters<Republish>[0]) => (fail ? Promise.reject(new Error("no")) : (sent.push(m), Promise.resolve()));
  return Object.assign(fn, { sent, close: () => Promise.resolve() });
}

describe("a push delivery, settled by the shared policy", () => {
  it("acknowledges what was handled, a recorded failure included (200)", async () => {
    for (const o of [{ result: "success" }, { result: "retry-later", delaySeconds: 3, detail: "x" }, { result: "permanent", detail: "x" }] as Outcome[]) {
      assert.deepEqual(await brief(answerPush(host(o), message(1))), { status: 200, result: o.result, action: "delete" });
    }
  });

  it("refuses a failure the object could not record (500), on its last delivery too, so Pub/Sub retries then dead-letters it", async () => {
    const retry: Outcome = { result: "retry", detail: "status write refused" };
    assert.equal((await answerPush(host(retry), message(1))).action, "hold");
    assert.equal((await answerPush(host(retry), message(1))).status, 500);
    assert.deepEqual(await brief(answerPush(host(retry), message(5))), { status: 500, result: "retry", action: "release" });
  });

  it("refuses a message that can never be handled (422) until the subscription dead-letters it", async () => {
    const bad: Outcome = { result: "dead-letter", detail: "malformed key event" };
    assert.deepEqual(await brief(answerPush(host(bad), message(1))), { status: 422, result: "dead-letter", action: "release" });
  });

  it("holds an outage (503) while deliveries remain, then re-sends a copy into the same ordering key and acknowledges", async () => {
    const down: Outcome = { result: "unavailable", detail: "ECONNREFUSED" };
    const r = recorder();
    assert.equal((await answerPush(host(down, r), message(1))).status, 503);
    assert.deepEqual(r.sent, []);
    assert.deepEqual(await brief(answerPush(host(down, r), message(4))), { status: 200, result: "unavailable", action: "resend" });
    assert.deepEqual(r.sent, [
      { body: "{}", orderingKey: "greetings.default.x~abc", attributes: { a: "1", [DEFERRED_SINCE_ATTRIBUTE]: "1000000", [DEFERRALS_ATTRIBUTE]: "1" } },
    ]);
  });

  it("holds instead when the copy cannot be published, or no topic is known (503)", async () => {
    const down: Outcome = { result: "unavailable", detail: "ECONNREFUSED" };
    assert.equal((await answerPush(host(down, recorder(true)), message(4))).status, 503);
    assert.equal((await answerPush(host(down), message(4))).status, 503);
  });
});
