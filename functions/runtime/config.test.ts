import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { loadConfig } from "./config.ts";

describe("function config", () => {
  it("defaults to the kubeconfig", () => {
    assert.equal(loadConfig({}).CRDFN_KUBE_AUTH, "kubeconfig");
  });
  it("names the bad setting in one line, without its value", () => {
    assert.throws(
      () => loadConfig({ CRDFN_KUBE_AUTH: "magic" }),
      (e: Error) => /^invalid setting CRDFN_KUBE_AUTH: /.test(e.message) && !e.message.includes("\n"),
    );
    assert.throws(() => loadConfig({ CRDFN_KUBE_AUTH: "token", CRDFN_KUBE_SERVER: "https://k" }), /invalid setting CRDFN_KUBE_TOKEN_FILE: required/);
    assert.throws(() => loadConfig({ CRDFN_KUBE_AUTH: "eks", CRDFN_KUBE_SERVER: "https://k", CRDFN_EKS_CLUSTER: "prod" }), /invalid setting AWS_REGION/);
    assert.throws(
      () => loadConfig({ CRDFN_KUBE_TOKEN: "", LOG_LEVEL: "info" }),
      (e: Error) => !e.message.includes("secret"),
    );
  });
});
