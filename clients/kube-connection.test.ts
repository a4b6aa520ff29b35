import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import type https from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { inClusterConnection, serverConnection } from "./kube-connection.ts";

describe("kube connections without client-node", () => {
  const root = mkdtempSync(join(tmpdir(), "crdfn-sa-"));
  after(() => rmSync(root, { recursive: true, force: true }));
  const mount = join(root, "var/run/secrets/kubernetes.io/serviceaccount");
  mkdirSync(mount, { recursive: true });
  writeFileSync(join(mount, "ca.crt"), "PEM");
  writeFileSync(join(mount, "token"), "tok-1\n");

  it("in a pod: the service's address (IPv6 in brackets), the mounted CA, and the token re-read after a minute", async () => {
    let now = 0;
    const c = inClusterConnection({ KUBERNETES_SERVICE_HOST: "fd00::1", KUBERNETES_SERVICE_PORT: "443" }, () => new Date(now), root);
    assert.equal(c.getCurrentCluster()?.server, "https://[fd00::1]:443");
    const options: https.RequestOptions = { headers: { accept: "application/json" } };
    await c.applyToHTTPSOptions(options);
    assert.equal(String(options.ca), "PEM");
    assert.deepEqual(options.headers, { accept: "application/json", Authorization: "Bearer tok-1" });
    writeFileSync(join(mount, "token"), "tok-2\n");
    now += 30_000;
    await c.applyToHTTPSOptions(options);
    assert.equal((options.headers as Record<string, string>).Authorization, "Bearer tok-1");
    now += 30_000;
    await c.applyToHTTPSOptions(options);
    assert.equal((options.headers as Record<string, string>).Authorization, "Bearer tok-2");
  });

  it("outside a pod, says which variables are missing", () => {
    assert.throws(() => inClusterConnection({}, () => new Date(), root), /KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set/);
  });

  it("a server and base64 CA: the caller's token provider authenticates", async () => {
    const c = serverConnection({ server: "https://eks.example", caData: Buffer.from("PEM2").toString("base64") });
    const options: https.RequestOptions = {};
    await c.applyToHTTPSOptions(options);
    assert.equal(String(options.ca), "PEM2");
    assert.equal(options.headers, undefined);
  });
});
