import { describe, it, before, after } from "node:test";
import assert from "node:assert/strict";
import { createServer, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { KubeConfig } from "@kubernetes/client-node";
import { KubeHttp, KubeHttpError, type WatchEvent } from "./kube-http.ts";

// A stand-in API server on loopback (plain HTTP, as behind `kubectl proxy`) whose responses
// each test scripts: the point is the client's timing and stream handling, not Kubernetes.
describe("KubeHttp", () => {
  let server: Server;
  let http: KubeHttp;
  const routes = new Map<string, (res: ServerResponse) => void>();

  before(async () => {
    server = createServer((req, res) => (routes.get(new URL(req.url ?? "/", "http://x").pathname) ?? ((r) => r.writeHead(404).end()))(res));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: "c", server: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, skipTLSVerify: true }],
      users: [{ name: "u" }],
      contexts: [{ name: "x", cluster: "c", user: "u" }],
      currentContext: "x",
    });
    http = new KubeHttp(kc);
  });

  after(() => {
    server.closeAllConnections();
    server.close();
  });

  const event = (rv: string): string => `${JSON.stringify({ type: "MODIFIED", object: { metadata: { name: "a", uid: "u", resourceVersion: rv } } })}\n`;

  it("turns an error status into a KubeHttpError with the server's message", async () => {
    routes.set("/gone", (res) => res.writeHead(410, { "content-type": "application/json" }).end(JSON.stringify({ kind: "Status", code: 410, message: "too old resource version" })));
    await assert.rejects(http.getJson("/gone", {}, new AbortController().signal), (e) => e instanceof KubeHttpError && e.status === 410 && e.message === "too old resource version");
  });

  it("gives up on a watch that goes silent", async () => {
    routes.set("/silent", (res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.write(event("1"));
    });
    const seen: WatchEvent[] = [];
    await assert.rejects(
      (async () => {
        for await (const ev of http.watch("/silent", {}, new AbortController().signal, 300)) seen.push(ev);
      })(),
      /silent/,
    );
    assert.equal(seen.length, 1);
  });

  it("does not count time the consumer spends paused as silence, and splits lines across chunks", async () => {
    routes.set("/chatty", (res) => {
      res.writeHead(200, { "content-type": "application/json" });
      const text = event("1") + event("2") + event("3");
      res.write(text.slice(0, 25));
      res.end(text.slice(25));
    });
    const rvs: string[] = [];
    for await (const ev of http.watch("/chatty", {}, new AbortController().signal, 200)) {
      rvs.push((ev.object as { metadata: { resourceVersion: string } }).metadata.resourceVersion);
      await new Promise((r) => setTimeout(r, 400)); // a full publish buffer
    }
    assert.deepEqual(rvs, ["1", "2", "3"]);
  });
});
