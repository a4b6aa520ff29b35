// /healthz (the process answers), /readyz (initial sync done, or a healthy standby), /metrics.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { Registry } from "prom-client";

export interface HealthSource {
  isReady(): boolean;
  /** Lines for /readyz's body (per resource, and any problem a person must fix). */
  readiness?(): string[];
  registry: Registry;
}

export interface HealthServer {
  port: number;
  close(): Promise<void>;
}

export async function serveHealth(source: HealthSource, port: number, host = "0.0.0.0"): Promise<HealthServer> {
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? "/").split("?")[0];
    if (path === "/healthz") {
      res.writeHead(200, { "content-type": "text/plain" }).end("ok\n");
    } else if (path === "/readyz") {
      const ready = source.isReady();
      const lines = [ready ? "ready" : "not ready", ...(source.readiness?.() ?? [])];
      res.writeHead(ready ? 200 : 503, { "content-type": "text/plain" }).end(`${lines.join("\n")}\n`);
    } else if (path === "/metrics") {
      source.registry.metrics().then(
        (text) => res.writeHead(200, { "content-type": source.registry.contentType }).end(text),
        () => res.writeHead(500).end(),
      );
    } else {
      res.writeHead(404).end();
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, resolve);
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
