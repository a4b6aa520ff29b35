import { describe, it, before, after } from "node:test";
import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { KubeConfig } from "@kubernetes/client-node";
import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider } from "@opentelemetry/sdk-trace";
import { ApiError, ApiNotReady, KubeHttp, KubeUnreachable, resourceOf, type WatchEvent } from "./kube-http.ts";
import { contextFrom } from "./tracing.ts";

// A stand-in API server on loopback (plain HTTP, as behind `kubectl proxy`) whose responses
// each test scripts: the point is the client's timing and stream handling, not Kubernetes.
describe("KubeHttp", () => {
  let server: Server;
  let http: KubeHttp;
  let kubeConfig: KubeConfig;
  const routes = new Map<string, (res: ServerResponse, req: IncomingMessage) => void>();

  before(async () => {
    server = createServer((req, res) => (routes.get(new URL(req.url ?? "/", "http://x").pathname) ?? ((r) => r.writeHead(404).end()))(res, req));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: "c", server: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, skipTLSVerify: true }],
      users: [{ name: "u" }],
      contexts: [{ name: "x", cluster: "c", user: "u" }],
      currentContext: "x",
    });
    kubeConfig = kc;
    http = new KubeHttp({ connection: kc });
  });

  after(() => {
    server.closeAllConnections();
    server.close();
  });

  const event = (rv: string): string => `${JSON.stringify({ type: "MODIFIED", object: { metadata: { name: "a", uid: "u", resourceVersion: rv } } })}\n`;

  it("turns an error status into an ApiError with the server's reason and message, naming the request", async () => {
    routes.set("/gone", (res) =>
      res
        .writeHead(410, { "content-type": "application/json" })
        .end(JSON.stringify({ kind: "Status", code: 410, reason: "Expired", message: "too old resource version" })),
    );
    await assert.rejects(
      http.getJson("/gone", {}, new AbortController().signal),
      (e) => e instanceof ApiError && e.code === 410 && e.reason === "Expired" && e.message === "GET /gone: 410 too old resource version",
    );
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

  it("sends a JSON body with its content type and the query, over one kept-alive connection", async () => {
    const seen: Array<{ method?: string; type?: string; query: string; body: string; port?: number }> = [];
    routes.set("/apis/g/v1/namespaces/n/things/a", (res, req) => {
      let body = "";
      req.on("data", (c: Buffer) => (body += String(c)));
      req.on("end", () => {
        seen.push({
          method: req.method,
          type: req.headers["content-type"],
          query: new URL(req.url ?? "/", "http://x").search,
          body,
          port: req.socket.remotePort,
        });
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ ok: true }));
      });
    });
    const path = "/apis/g/v1/namespaces/n/things/a";
    assert.deepEqual(
      await http.json("PATCH", path, {
        body: { spec: 1 },
        contentType: "application/apply-patch+yaml",
        query: { fieldManager: "m", force: "true", empty: "" },
      }),
      { ok: true },
    );
    await http.json("PUT", path, { body: { spec: 2 } });
    assert.deepEqual(
      seen.map(({ port: _, ...rest }) => rest),
      [
        { method: "PATCH", type: "application/apply-patch+yaml", query: "?fieldManager=m&force=true", body: '{"spec":1}' },
        { method: "PUT", type: "application/json", query: "", body: '{"spec":2}' },
      ],
    );
    assert.equal(seen[0]?.port, seen[1]?.port, "the second request reuses the first one's connection");
  });

  it("sends the token provider's bearer token in place of the kubeconfig's credentials", async () => {
    routes.set("/who", (res, req) =>
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ auth: req.headers.authorization ?? null })),
    );
    const withToken = new KubeHttp({ connection: kubeConfig, token: () => Promise.resolve("t0ken") });
    assert.deepEqual(await withToken.getJson("/who", {}), { auth: "Bearer t0ken" });
    assert.deepEqual(await http.getJson("/who", {}), { auth: null });
  });

  it("gives up on a server that does not answer in timeoutMs", async () => {
    routes.set("/hung", () => undefined);
    const impatient = new KubeHttp({ connection: kubeConfig, timeoutMs: 200 });
    await assert.rejects(
      impatient.getJson("/hung", {}),
      (e) => e instanceof KubeUnreachable && e.kind === "timeout" && e.message === "GET /hung: no answer from the API server in 200 ms",
    );
  });

  it("says a watch gone silent is the server's silence, by type", async () => {
    routes.set("/mute", (res) => res.writeHead(200, { "content-type": "application/json" }).flushHeaders());
    await assert.rejects(
      (async () => {
        for await (const _ of http.watch("/mute", {}, new AbortController().signal, 200)) void _;
      })(),
      (e) => e instanceof KubeUnreachable && e.kind === "silent",
    );
  });

  it("throws KubeUnreachable for a refused connection and for a connection reset mid-answer", async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: "c", server: `http://127.0.0.1:${port}`, skipTLSVerify: true }],
      users: [{ name: "u" }],
      contexts: [{ name: "x", cluster: "c", user: "u" }],
      currentContext: "x",
    });
    await assert.rejects(
      new KubeHttp({ connection: kc }).getJson("/x", {}),
      (e) => e instanceof KubeUnreachable && e.kind === "refused" && /GET \/x: the API server did not answer/.test(e.message),
    );

    routes.set("/cut", (res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.write('{"items": [');
      setImmediate(() => res.socket?.destroy());
    });
    await assert.rejects(http.getJson("/cut", {}), (e) => e instanceof KubeUnreachable && e.kind === "reset");
  });

  it("takes a 403 for the server's outage while its /readyz is not 200, and for a refusal once it is", async () => {
    let ready = 500;
    const readyzAsked: Array<string | null> = [];
    routes.set("/readyz", (res, req) => {
      readyzAsked.push(req.headers.authorization ?? null);
      res.writeHead(ready).end(ready === 200 ? "ok" : "[-]poststarthook/rbac/bootstrap-roles failed: reason withheld\nreadyz check failed");
    });
    routes.set("/forbidden", (res) =>
      res.writeHead(403, { "content-type": "application/json" }).end(JSON.stringify({ kind: "Status", code: 403, reason: "Forbidden", message: "forbidden" })),
    );
    let t = 0;
    const client = new KubeHttp({ connection: kubeConfig, token: () => Promise.resolve("sa-token"), now: () => t });
    await assert.rejects(
      client.getJson("/forbidden", {}),
      (e) => e instanceof ApiNotReady && e.code === 403 && /not ready: \/readyz answered 500/.test(e.message),
    );
    assert.deepEqual(readyzAsked, [null], "/readyz is asked anonymously");
    ready = 200;
    t += 2000; // past the reuse of the last answer
    await assert.rejects(client.getJson("/forbidden", {}), (e) => e instanceof ApiError && !(e instanceof ApiNotReady) && e.code === 403);
  });

  it("takes a 403 for the warm-up of a server that just answered again, without asking it", async () => {
    let up = false;
    let readyzAsked = 0;
    routes.set("/readyz", (res) => {
      readyzAsked++;
      res.writeHead(200).end("ok");
    });
    routes.set("/flaky", (res, req) => {
      if (!up) return req.socket.destroy();
      res.writeHead(403, { "content-type": "application/json" }).end(JSON.stringify({ kind: "Status", code: 403, reason: "Forbidden", message: "forbidden" }));
    });
    let t = 0;
    const client = new KubeHttp({ connection: kubeConfig, now: () => t });
    await assert.rejects(client.getJson("/flaky", {}), (e) => e instanceof KubeUnreachable && e.kind === "reset");
    up = true;
    t = 1000;
    await assert.rejects(client.getJson("/flaky", {}), (e) => e instanceof ApiNotReady && /answered again/.test(e.why));
    assert.equal(readyzAsked, 0);
    t = 60_000;
    await assert.rejects(client.getJson("/flaky", {}), (e) => e instanceof ApiError && !(e instanceof ApiNotReady));
    assert.equal(readyzAsked, 1);
  });

  it("with a tracer, a request that says where it belongs is a client span, its context sent on (traceparent, tracestate); others are not traced", async () => {
    const seen: string[] = [];
    routes.set("/apis/example.com/v1/namespaces/d/greetings/g", (res, req) => {
      seen.push(`${String(req.headers.traceparent)} ${String(req.headers.tracestate)}`);
      res.writeHead(503, { "content-type": "application/json" }).end(JSON.stringify({ kind: "Status", code: 503, reason: "ServiceUnavailable" }));
    });
    const exporter = new InMemorySpanExporter();
    const tracer = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter })] }).getTracer("t");
    const client = new KubeHttp({ connection: kubeConfig }, { tracer });
    const parent = contextFrom({ traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", tracestate: "k=v" });
    const path = "/apis/example.com/v1/namespaces/d/greetings/g";
    assert.equal((await client.request("PATCH", path, { trace: { parent, attempt: 3 }, body: {} })).status, 503);
    assert.equal((await client.request("PATCH", path, { body: {} })).status, 503);
    const [span, ...more] = exporter.getFinishedSpans();
    assert.deepEqual(more, []);
    assert.equal(span!.name, "kube PATCH greetings");
    assert.equal(span!.parentSpanContext?.spanId, "00f067aa0ba902b7");
    assert.deepEqual(span!.attributes, {
      "http.request.method": "PATCH",
      "url.path": path,
      "crdfn.attempt": 3,
      "http.response.status_code": 503,
      "error.type": "503",
    });
    assert.equal(span!.status.code, 2);
    assert.equal(span!.status.message, "503 ServiceUnavailable");
    assert.deepEqual(seen, [`00-4bf92f3577b34da6a3ce929d0e0e4736-${span!.spanContext().spanId}-01 k=v`, "undefined undefined"]);
  });

  it("names a request's span by the resource its path names", () => {
    assert.deepEqual(resourceOf("/api/v1/namespaces/a/configmaps/b"), { resource: "configmaps" });
    assert.deepEqual(resourceOf("/apis/example.com/v1/namespaces/a/greetings/x/status"), { resource: "greetings", subresource: "status" });
    assert.deepEqual(resourceOf("/apis/example.com/v1/clusterthings/x"), { resource: "clusterthings" });
    assert.deepEqual(resourceOf("/api/v1/namespaces/a"), { resource: "namespaces" });
    assert.deepEqual(resourceOf("/api/v1/namespaces/a/status"), { resource: "namespaces", subresource: "status" });
    assert.deepEqual(resourceOf("/api/v1/namespaces/a/events?limit=1"), { resource: "events" });
    assert.deepEqual(resourceOf("/readyz"), { resource: "readyz" });
  });
});
