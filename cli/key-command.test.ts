import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { operatorKey, signKeyEvent, verifyKeyEvent } from "../core/event-auth.ts";
import type { KeyEvent } from "../core/event.ts";
import { loadEventKeyrings } from "../functions/clusters/registry.ts";
import { clusterKeysOf, derivedSetting } from "./key-command.ts";

const k1 = `k1:${Buffer.alloc(32, 1).toString("base64")}`;
const k2 = `k2:${Buffer.alloc(32, 2).toString("base64")}`;
const event = { v: 3, cluster: "prod", group: "example.com", plural: "greetings", name: "x" } as unknown as KeyEvent;
const prod = new Map([["prod", { auth: "in-cluster" as const }]]);

describe("crdfn key derive", () => {
  it("prints what the operator's function holds: its keys, which verify what the bridge signs with the cluster key, for that operator only", () => {
    const keys = clusterKeysOf(`${k1}\n${k2}\n`, undefined);
    const setting = derivedSetting(keys, ["greetings.example.com"]);
    assert.match(setting, /^k1:[A-Za-z0-9+/=]+,k2:[A-Za-z0-9+/=]+$/);
    const ring = loadEventKeyrings(setting, prod, ["greetings.example.com"]).get("prod")!.get("greetings.example.com")!;
    for (const k of keys) assert.deepEqual(verifyKeyEvent(signKeyEvent(event, operatorKey(k, "greetings.example.com")), ring), { ok: true });
    assert.equal(verifyKeyEvent(signKeyEvent(event, operatorKey(keys[0]!, "crontabs.stable.example.com")), ring).ok, false);
  });
  it("names each operator for a function serving several; --kid picks the cluster keys", () => {
    const setting = derivedSetting(clusterKeysOf(`${k1},${k2}`, ["k2"]), ["greetings.example.com", "crontabs.stable.example.com"]);
    assert.deepEqual(
      setting.split(",").map((item) => item.split(":").slice(0, 2).join(":")),
      ["greetings.example.com:k2", "crontabs.stable.example.com:k2"],
    );
    const rings = loadEventKeyrings(setting, prod, ["greetings.example.com", "crontabs.stable.example.com"]).get("prod")!;
    assert.deepEqual([...rings.get("crontabs.stable.example.com")!.keys()], ["k2"]);
  });
  it("bad input: one line, never the secret", () => {
    assert.throws(() => clusterKeysOf("", undefined), /stdin holds no cluster key/);
    assert.throws(() => clusterKeysOf(k1, ["k9"]), /--kid k9: no such key on stdin \(it has k1\)/);
    assert.throws(
      () => clusterKeysOf(`k1:${Buffer.alloc(8, 1).toString("base64")}`, undefined),
      (e: Error) => /cluster key 1 on stdin: the secret of key "k1" has 8 bytes/.test(e.message) && !e.message.includes(Buffer.alloc(8, 1).toString("base64")),
    );
  });
});
