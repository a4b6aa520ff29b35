// A key per operator, as the runtime holds it: an operator's function accepts the events signed
// with its own operator's key only (the key a leak of another operator's function would give is
// refused, one line, a dead letter), of its own cluster only, and several kids at once while a key
// rotates. Through createRuntime and through buildFromEnv serving two operators from one
// environment (each its own keyring by its resource: one kid, two keys).
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { pino, type Logger } from "pino";
import { z } from "zod";
import { formatEventKey, operatorKey, signKeyEvent, type EventKey } from "../../core/event-auth.ts";
import { encodeKeyEvent, type KeyEvent } from "../../core/event.ts";
import { defineOperator } from "../../core/operator.ts";
import { createFakeKube } from "../testing/index.ts";
import { buildFromEnv } from "./entry.ts";
import { createRuntime, runtimeByResource, type Runtime } from "./runtime.ts";

const opOf = (group: string, plural: string, kind: string) =>
  defineOperator({ resource: { group, version: "v1", plural, kind }, spec: z.object({}), reconcile: () => ({}) });
const greetings = opOf("example.com", "greetings", "Greeting");
const crontabs = opOf("stable.example.com", "crontabs", "CronTab");

const clusterKey = (kid: string, fill: number): EventKey => ({ kid, secret: Buffer.alloc(32, fill) });
const old = clusterKey("k-old", 1);
const next = clusterKey("k-new", 2);

const eventOf = (op: typeof greetings, cluster = "prod"): KeyEvent => ({
  v: 3,
  cluster,
  group: op.resource.group,
  version: "v1",
  plural: op.resource.plural,
  kind: op.resource.kind,
  namespace: "default",
  name: "x",
  uid: "u",
  resourceVersion: "1",
  generation: 1,
  type: "ADDED",
  observedAt: "2026-11-21T00:00:00Z",
});
const resourceOf = (op: typeof greetings) => `${op.resource.plural}.${op.resource.group}`;
/** As the bridge signs: with the event's operator's key under `cluster`'s key. */
const bridgeSigned = (e: KeyEvent, cluster: EventKey) => encodeKeyEvent(signKeyEvent(e, operatorKey(cluster, `${e.plural}.${e.group}`)));

function logged(): { logger: Logger; lines: string[] } {
  const lines: string[] = [];
  return { logger: pino({ level: "info" }, { write: (l: string) => void lines.push(String((JSON.parse(l) as { msg: string }).msg)) }), lines };
}

function runtimeOf(op: typeof greetings, keys: EventKey[], logger: Logger, cluster = "prod"): Runtime {
  const ring = new Map(keys.map((k) => operatorKey(k, resourceOf(op))).map((k) => [k.kid, k.secret]));
  return createRuntime(op, { api: createFakeKube(), logger, clock: () => new Date(), cluster, eventKeys: ring });
}

const detail = (runtime: Runtime, body: string): string => {
  const d = runtime.receive({ id: "m", body });
  return d.ok ? "received" : d.outcome.detail;
};

describe("a key per operator", () => {
  it("an event for one operator signed with another operator's key is refused by the first's runtime: one line, a dead letter", () => {
    const { logger, lines } = logged();
    const b = runtimeOf(greetings, [old], logger);
    assert.equal(detail(b, bridgeSigned(eventOf(greetings), old)), "received");
    // The CronTab function's key (what a leak of its environment gives) signs a Greeting's event.
    const forged = encodeKeyEvent(signKeyEvent(eventOf(greetings), operatorKey(old, resourceOf(crontabs))));
    assert.equal(detail(b, forged), 'MAC does not verify (key id "k-old")');
    // And the cluster key itself is no operator's key: the bridge never signs with it.
    assert.equal(detail(b, encodeKeyEvent(signKeyEvent(eventOf(greetings), old))), 'MAC does not verify (key id "k-old")');
    assert.equal(lines.filter((l) => l.includes("MAC does not verify")).length, 2);
    assert.match(
      lines.at(-2)!,
      /^key event for Greeting default\/x of cluster "prod" refused: MAC does not verify \(key id "k-old"\); leaving it for the dead-letter queue$/,
    );
  });

  it("createRuntime serves its own cluster only", () => {
    const runtime = runtimeOf(greetings, [old], pino({ level: "silent" }));
    assert.equal(detail(runtime, bridgeSigned(eventOf(greetings, "other"), old)), "cluster other is not served here");
  });

  it("two operators behind one queue: each event verified with its own operator's ring, though both share a kid", () => {
    const { logger } = logged();
    const both = runtimeByResource([runtimeOf(greetings, [old], logger), runtimeOf(crontabs, [old], logger)], logger);
    assert.equal(detail(both, bridgeSigned(eventOf(greetings), old)), "received");
    assert.equal(detail(both, bridgeSigned(eventOf(crontabs), old)), "received");
    const crossed = encodeKeyEvent(signKeyEvent(eventOf(crontabs), operatorKey(old, resourceOf(greetings))));
    assert.equal(detail(both, crossed), 'MAC does not verify (key id "k-old")');
  });

  it("rotation: during the overlap events signed with the old or the new kid are accepted; after it, the old is refused", () => {
    const silent = pino({ level: "silent" });
    const overlap = runtimeOf(greetings, [old, next], silent);
    assert.equal(detail(overlap, bridgeSigned(eventOf(greetings), old)), "received");
    assert.equal(detail(overlap, bridgeSigned(eventOf(greetings), next)), "received");
    const after = runtimeOf(greetings, [next], silent);
    assert.equal(detail(after, bridgeSigned(eventOf(greetings), next)), "received");
    assert.equal(
      detail(after, bridgeSigned(eventOf(greetings), old)),
      'MAC does not verify: key id "k-old" is not one this function accepts for cluster "prod"',
    );
  });

  it("one environment serving two operators lists a key per operator per kid (CRDFN_EVENT_KEYS); each operator verifies with its own", () => {
    const item = (op: typeof greetings, k: EventKey) => `${resourceOf(op)}:${formatEventKey(operatorKey(k, resourceOf(op)))}`;
    const env = {
      CRDFN_CLUSTER: "prod",
      CRDFN_KUBE_AUTH: "token",
      CRDFN_KUBE_SERVER: "https://127.0.0.1:9",
      CRDFN_KUBE_TOKEN: "t",
      LOG_LEVEL: "silent",
      CRDFN_EVENT_KEYS: [item(greetings, old), item(greetings, next), item(crontabs, old), item(crontabs, next)].join(","),
    };
    const { runtime } = buildFromEnv([greetings, crontabs], env, { logger: pino({ level: "silent" }) });
    for (const k of [old, next]) {
      assert.equal(detail(runtime, bridgeSigned(eventOf(greetings), k)), "received");
      assert.equal(detail(runtime, bridgeSigned(eventOf(crontabs), k)), "received");
    }
    const crossed = encodeKeyEvent(signKeyEvent(eventOf(greetings), operatorKey(next, resourceOf(crontabs))));
    assert.equal(detail(runtime, crossed), 'MAC does not verify (key id "k-new")');
    // The CronTab function's own environment: its key alone (no resource part), and it verifies no Greeting.
    const alone = buildFromEnv(
      crontabs,
      { ...env, CRDFN_EVENT_KEYS: formatEventKey(operatorKey(old, resourceOf(crontabs))) },
      { logger: pino({ level: "silent" }) },
    );
    assert.equal(detail(alone.runtime, bridgeSigned(eventOf(crontabs), old)), "received");
    assert.equal(detail(alone.runtime, bridgeSigned(eventOf(greetings), old)), "not a resource served here");
    assert.throws(
      () => buildFromEnv([greetings, crontabs], { ...env, CRDFN_EVENT_KEYS: item(greetings, old) }),
      /invalid setting CRDFN_EVENT_KEYS: no key for operator crontabs\.stable\.example\.com of cluster "prod"/,
    );
  });
});
