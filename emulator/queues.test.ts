import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { elasticMqQueuesConfig, queueDefinitions, queueUrlsAt } from "./queues.ts";

describe("queue definitions", () => {
  it("declare each dead-letter queue before the queue that redrives to it", () => {
    const defs = queueDefinitions();
    for (const d of defs) {
      if (d.deadLetter) assert.ok(defs.findIndex((x) => x.key === d.deadLetter) < defs.indexOf(d), `${d.name} before its DLQ`);
    }
  });

  it("become ElasticMQ queues with FIFO flags and a redrive after 5 receives", () => {
    const conf = elasticMqQueuesConfig(queueDefinitions());
    assert.match(conf, /"crdfn-events\.fifo" \{ fifo = true, .*deadLettersQueue \{ name = "crdfn-events-dlq\.fifo", maxReceiveCount = 5 \} \}/);
    assert.doesNotMatch(conf, /fifo = false/, "no standard queue: every re-delivery of an object goes through its FIFO group");
  });

  it("have SQS-style URLs", () => {
    assert.equal(queueUrlsAt("http://127.0.0.1:9324", queueDefinitions()).fifo, "http://127.0.0.1:9324/000000000000/crdfn-events.fifo");
  });
});
