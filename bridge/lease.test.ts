import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { createServer, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { pino } from "pino";
import { KubeHttp } from "../clients/kube-http.ts";
import { serverConnection } from "../clients/kube-connection.ts";
import { LeaderElector } from "./lease.ts";

interface StoredLease {
  metadata: { name: string; namespace: string; resourceVersion: string };
  spec: { holderIdentity?: string; renewTime?: string; [field: string]: unknown };
}

/** The Lease API as the API server keeps it: one object, and a write must name its current resourceVersion. */
async function fakeLeaseServer(): Promise<{
  server: Server;
  url: string;
  requests: string[];
  lease(): StoredLease | undefined;
  overwrite(holder: string): void;
}> {
  let stored: StoredLease | undefined;
  let rv = 0;
  const requests: string[] = [];
  const send = (res: ServerResponse, status: number, body: unknown) => res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));
  const store = (lease: StoredLease): StoredLease => (stored = { ...lease, metadata: { ...lease.metadata, resourceVersion: String(++rv) } });
  const server = createServer((req, res) => {
    let text = "";
    req.setEncoding("utf8").on("data", (c: string) => (text += c));
    req.on("end", () => {
      requests.push(req.method ?? "");
      const body = text === "" ? undefined : (JSON.parse(text) as StoredLease);
      if (req.method === "GET") return stored ? send(res, 200, stored) : send(res, 404, { kind: "Status", reason: "NotFound", code: 404 });
      if (req.method === "POST") return stored ? send(res, 409, { kind: "Status", reason: "AlreadyExists", code: 409 }) : send(res, 201, store(body!));
      if (body?.metadata.resourceVersion !== stored?.metadata.resourceVersion) return send(res, 409, { kind: "Status", reason: "Conflict", code: 409 });
      return send(res, 200, store(body!));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    server,
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    lease: () => stored,
    overwrite(holder) {
      if (stored) store({ ...stored, spec: { ...stored.spec, holderIdentity: holder } });
    },
  };
}

function elector(url: string, events: string[]): LeaderElector {
  return new LeaderElector({
    http: new KubeHttp({ connection: serverConnection({ server: url }) }),
    namespace: "ns",
    name: "bridge",
    identity: "me",
    // Renewals every 200 ms; standing down after 700 ms without one.
    durationSeconds: 1,
    logger: pino({ level: "silent" }),
    now: () => new Date(),
    onStartedLeading: () => events.push("started"),
    onStoppedLeading: () => events.push("stopped"),
  });
}

async function until(condition: () => boolean, what: string): Promise<void> {
  for (let i = 0; !condition(); i++) {
    if (i > 100) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

/** Runs an elector against a fresh fake API server; `body` starts once it leads, and both stop after it. */
async function whileLeading(body: (api: Awaited<ReturnType<typeof fakeLeaseServer>>, events: string[]) => Promise<void>): Promise<void> {
  const api = await fakeLeaseServer();
  const events: string[] = [];
  const stop = new AbortController();
  const running = elector(api.url, events).run(stop.signal);
  try {
    await until(() => events.includes("started"), "leadership");
    await body(api, events);
  } finally {
    stop.abort();
    await running;
    api.server.close();
  }
}

describe("leader election", () => {
  it("a leader renews by writing the Lease, without reading it first", () =>
    whileLeading(async (api, events) => {
      const acquired = api.requests.length;
      await until(() => api.requests.length >= acquired + 5, "five renewals");
      assert.deepEqual(api.requests.slice(0, 2), ["GET", "POST"]);
      assert.deepEqual(new Set(api.requests.slice(acquired)), new Set(["PUT"]));
      assert.equal(api.lease()?.spec.holderIdentity, "me");
      assert.deepEqual(events, ["started"]);
    }));

  it("a renewal that finds the Lease written by another reads it, and the leader stands down", () =>
    whileLeading(async (api, events) => {
      const before = api.requests.length;
      // Another replica holds the Lease now, and keeps renewing it.
      api.overwrite("other");
      const renewing = setInterval(() => api.overwrite("other"), 100);
      await until(() => events.includes("stopped"), "standing down").finally(() => clearInterval(renewing));
      const after = api.requests.slice(before);
      assert.deepEqual(after.slice(0, 2), ["PUT", "GET"], "the conflicting renewal falls back to reading the Lease");
      assert.equal(api.lease()?.spec.holderIdentity, "other", "a Lease another replica renews is never written over");
    }));
});
