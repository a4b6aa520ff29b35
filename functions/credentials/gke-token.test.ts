import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { isInfrastructureFailure } from "../runtime/outcome.ts";
import { gkeTokenProvider } from "./gke-token.ts";

describe("GKE access tokens from the metadata server", () => {
  it("asks with Metadata-Flavor: Google, keeps the token until a minute before it expires", async () => {
    const asked: Array<string | undefined> = [];
    const server = createServer((req, res) => {
      asked.push(req.headers["metadata-flavor"] as string | undefined);
      res.setHeader("content-type", "application/json").end(JSON.stringify({ access_token: `t${asked.length}`, expires_in: 120, token_type: "Bearer" }));
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    let now = 0;
    const token = gkeTokenProvider({ clock: () => new Date(now), metadataHost: `127.0.0.1:${(server.address() as AddressInfo).port}` });
    try {
      assert.deepEqual(await Promise.all([token(), token()]), ["t1", "t1"], "one request for callers at once");
      now = 59_000;
      assert.equal(await token(), "t1");
      now = 61_000;
      assert.equal(await token(), "t2", "refreshed a minute before expiry");
      assert.deepEqual(asked, ["Google", "Google"]);
    } finally {
      server.close();
    }
  });

  it("an unreachable metadata server is an outage, not the object's failure", async () => {
    // A port nothing listens on any more.
    const closed = createServer();
    await new Promise<void>((r) => closed.listen(0, "127.0.0.1", r));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((r) => closed.close(r));
    const token = gkeTokenProvider({ clock: () => new Date(), metadataHost: `127.0.0.1:${port}` });
    const error = await token().then(
      () => undefined,
      (e: unknown) => e,
    );
    assert.ok(error instanceof Error);
    assert.match(error.message, /^gke authentication: the metadata server 127\.0\.0\.1:\d+ did not answer/);
    assert.equal(isInfrastructureFailure(error), true);
  });
});
