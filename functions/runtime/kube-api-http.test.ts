import { describe, it, before, after } from "node:test";
import assert from "node:assert/strict";
import { createServer, type RequestListener, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { KubeConfig } from "@kubernetes/client-node";
import { ApiError } from "../../clients/kube-http.ts";
import { createKubeApi } from "./kube-api-http.ts";
import type { KubeApi } from "./kube-api.ts";

async function loopbackApi(handler: RequestListener): Promise<{ server: Server; api: KubeApi }> {
  const server = createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromClusterAndUser({ name: "c", server: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, skipTLSVerify: true }, { name: "u" });
  return { server, api: createKubeApi({ connection: kubeConfig }) };
}

function closeServer(server: Server): void {
  server.closeAllConnections();
  server.close();
}

// A loopback server that knows no object: the port's mapping of API errors, not Kubernetes.
describe("createKubeApi", () => {
  let server: Server;
  let api: KubeApi;

  before(async () => {
    ({ server, api } = await loopbackApi((_, res) =>
      res.writeHead(404, { "content-type": "application/json" }).end(JSON.stringify({ kind: "Status", code: 404, reason: "NotFound", message: "not found" })),
    ));
  });

  after(() => closeServer(server));

  it("reads a missing object as undefined, and a write to it throws ApiError", async () => {
    const ref = { group: "g", version: "v1", plural: "things", namespace: "n", name: "missing" };
    assert.equal(await api.get(ref), undefined);
    await assert.rejects(api.mergePatch(ref, {}), (e) => e instanceof ApiError && e.code === 404 && e.reason === "NotFound");
  });
});

// A loopback server whose watch cache lags: reads at a resourceVersion time out (504, as the API
// server answers "Too large resource version"); quorum reads answer.
describe("createKubeApi: reads not older than a version", () => {
  let server: Server;
  let api: KubeApi;
  const reads: string[] = [];

  before(async () => {
    ({ server, api } = await loopbackApi((req, res) => {
      const url = new URL(req.url ?? "", "http://x");
      reads.push(url.searchParams.get("resourceVersion") ?? "quorum");
      if (url.searchParams.has("resourceVersion")) {
        res
          .writeHead(504, { "content-type": "application/json" })
          .end(JSON.stringify({ kind: "Status", code: 504, reason: "Timeout", message: "Too large resource version" }));
        return;
      }
      res
        .writeHead(200, { "content-type": "application/json" })
        .end(JSON.stringify({ apiVersion: "g/v1", kind: "Thing", metadata: { name: "a", resourceVersion: "8" } }));
    }));
  });

  after(() => closeServer(server));

  it("asks for the watch cache at that version, and reads etcd when the cache has not caught up", async () => {
    const object = await api.get({ group: "g", version: "v1", plural: "things", namespace: "n", name: "a" }, { notOlderThan: "7" });
    assert.equal(object?.metadata.resourceVersion, "8");
    assert.deepEqual(reads, ["7", "quorum"]);
  });
});
