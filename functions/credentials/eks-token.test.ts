import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { EKS_TOKEN_PREFIX, eksTokenProvider, signEksToken } from "./eks-token.ts";

// AWS's documented example credentials: not a secret.
const credentials = { accessKeyId: "AKIDEXAMPLE", secretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY" };
const fixed = new Date("2026-11-21T12:00:00Z");

describe("EKS IAM token", () => {
  it("is a base64url presigned STS GetCallerIdentity URL with the cluster id signed in", async () => {
    const token = await signEksToken({ clusterName: "prod", region: "eu-west-1", credentials, clock: () => fixed });
    assert.ok(token.startsWith(EKS_TOKEN_PREFIX));
    const body = token.slice(EKS_TOKEN_PREFIX.length);
    assert.match(body, /^[A-Za-z0-9_-]+$/, "base64url without padding");
    const url = new URL(Buffer.from(body, "base64url").toString("utf8"));
    assert.equal(url.origin, "https://sts.eu-west-1.amazonaws.com");
    assert.equal(url.searchParams.get("Action"), "GetCallerIdentity");
    assert.equal(url.searchParams.get("Version"), "2011-06-15");
    assert.equal(url.searchParams.get("X-Amz-Algorithm"), "AWS4-HMAC-SHA256");
    assert.equal(url.searchParams.get("X-Amz-Credential"), "AKIDEXAMPLE/20261121/eu-west-1/sts/aws4_request");
    assert.equal(url.searchParams.get("X-Amz-Date"), "20261121T120000Z");
    assert.equal(url.searchParams.get("X-Amz-Expires"), "60");
    assert.equal(url.searchParams.get("X-Amz-SignedHeaders"), "host;x-k8s-aws-id");
    assert.match(url.searchParams.get("X-Amz-Signature") ?? "", /^[0-9a-f]{64}$/);
    // Deterministic for fixed inputs: the same credentials and clock sign the same URL.
    assert.equal(await signEksToken({ clusterName: "prod", region: "eu-west-1", credentials, clock: () => fixed }), token);
    assert.notEqual(await signEksToken({ clusterName: "other", region: "eu-west-1", credentials, clock: () => fixed }), token);
  });

  it("is cached for less than 15 minutes", async () => {
    let now = fixed.getTime();
    const provider = eksTokenProvider({ clusterName: "prod", region: "eu-west-1", credentials, clock: () => new Date(now) });
    const first = await provider();
    now += 9 * 60_000;
    assert.equal(await provider(), first);
    now += 2 * 60_000;
    const renewed = await provider();
    assert.notEqual(renewed, first);
    assert.match(Buffer.from(renewed.slice(EKS_TOKEN_PREFIX.length), "base64url").toString(), /X-Amz-Date=20261121T121100Z/);
  });
});
