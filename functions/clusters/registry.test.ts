import type { KeyObject } from "node:crypto";
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { loadConfig } from "../runtime/config.ts";
import { loadClusterRegistry, loadEventKeyrings, type ClusterRegistry } from "./registry.ts";

const noFile = (path: string): string => {
  throw Object.assign(new Error(`ENOENT: ${path}`), { code: "ENOENT" });
};
const load = (env: NodeJS.ProcessEnv, readFile = noFile) => loadClusterRegistry(loadConfig(env), readFile);
const oneLine = (pattern: RegExp) => (e: Error) => pattern.test(e.message) && !e.message.includes("\n");

describe("cluster registry", () => {
  it("without a registry, the single-cluster settings are one entry named CRDFN_CLUSTER", () => {
    assert.deepEqual([...load({})], [["default", { auth: "kubeconfig" }]]);
    assert.deepEqual(
      [...load({ CRDFN_CLUSTER: "prod-eu", CRDFN_KUBE_AUTH: "eks", CRDFN_KUBE_SERVER: "https://k", CRDFN_EKS_CLUSTER: "prod", AWS_REGION: "eu-west-1" })],
      [["prod-eu", { auth: "eks", server: "https://k", eksCluster: "prod", region: "eu-west-1" }]],
    );
  });

  it("reads every cluster from CRDFN_CLUSTERS (JSON) or CRDFN_CLUSTERS_FILE (YAML or JSON)", () => {
    const clusters = {
      a: { auth: "kubeconfig", kubeconfig: "/k/a", context: "ctx-a" },
      b: { auth: "eks", server: "https://b.eks.amazonaws.com", caData: "QUJD", eksCluster: "b-prod", region: "us-east-2" },
      c: { auth: "token", server: "https://c", caFile: "/ca.pem", tokenFile: "/var/run/token" },
    };
    const registry = load({ CRDFN_CLUSTERS: JSON.stringify(clusters) });
    assert.deepEqual([...registry.keys()], ["a", "b", "c"]);
    assert.deepEqual(registry.get("b"), clusters.b);
    const fromFile = load({ CRDFN_CLUSTERS_FILE: "/etc/clusters.yaml" }, () => "a:\n  auth: kubeconfig\n  kubeconfig: /k/a\n");
    assert.deepEqual([...fromFile], [["a", { auth: "kubeconfig", kubeconfig: "/k/a" }]]);
  });

  it("an eks entry without a region signs for AWS_REGION", () => {
    const registry = load({ AWS_REGION: "eu-west-1", CRDFN_CLUSTERS: JSON.stringify({ x: { auth: "eks", server: "https://x", eksCluster: "x" } }) });
    assert.equal(registry.get("x")?.auth, "eks");
    assert.throws(
      () => load({ CRDFN_CLUSTERS: JSON.stringify({ x: { auth: "eks", server: "https://x", eksCluster: "x" } }) }),
      oneLine(/^invalid setting CRDFN_CLUSTERS: cluster "x": region: required/),
    );
  });

  it("bad input: one line naming the setting and the bad entry, never a value", () => {
    const bad = (clusters: unknown, pattern: RegExp) => assert.throws(() => load({ CRDFN_CLUSTERS: JSON.stringify(clusters) }), oneLine(pattern));
    bad({ b: { auth: "token", server: "not a url", token: "s3cret" } }, /^invalid setting CRDFN_CLUSTERS: cluster "b": server: /);
    bad({ b: { auth: "token", server: "https://b" } }, /^invalid setting CRDFN_CLUSTERS: cluster "b": tokenFile: needs exactly one of token, tokenFile/);
    bad({ b: { auth: "magic" } }, /^invalid setting CRDFN_CLUSTERS: cluster "b": auth: /);
    bad({ b: { auth: "kubeconfig", kubeconfg: "/typo" } }, /^invalid setting CRDFN_CLUSTERS: cluster "b": /);
    bad({ "no/slash": { auth: "kubeconfig" } }, /^invalid setting CRDFN_CLUSTERS: cluster id "no\/slash": /);
    bad({}, /^invalid setting CRDFN_CLUSTERS: names no cluster/);
    bad([], /^invalid setting CRDFN_CLUSTERS: /);
    assert.throws(
      () => load({ CRDFN_CLUSTERS: '{"b": {"auth": "token", "token": "s3cret"' }),
      (e: Error) => e.message === "invalid setting CRDFN_CLUSTERS: not valid JSON",
    );
    assert.throws(
      () => load({ CRDFN_CLUSTERS: JSON.stringify({ b: { auth: "token", server: "x", token: "s3cret" } }) }),
      (e: Error) => !e.message.includes("s3cret"),
    );
    assert.throws(() => load({ CRDFN_CLUSTERS_FILE: "/nope.yaml" }), oneLine(/^invalid setting CRDFN_CLUSTERS_FILE: cannot read \/nope.yaml: ENOENT$/));
  });

  it("a registry and the single-cluster settings are never mixed", () => {
    const clusters = JSON.stringify({ a: { auth: "kubeconfig" } });
    assert.throws(() => load({ CRDFN_CLUSTERS: clusters, CRDFN_KUBE_AUTH: "eks" }), oneLine(/^invalid setting CRDFN_KUBE_AUTH: not with CRDFN_CLUSTERS/));
    assert.throws(() => load({ CRDFN_CLUSTERS: clusters, CRDFN_CLUSTER: "a" }), oneLine(/^invalid setting CRDFN_CLUSTER: not with CRDFN_CLUSTERS/));
    assert.throws(() => load({ CRDFN_CLUSTERS: clusters, CRDFN_CLUSTERS_FILE: "/f" }), oneLine(/^invalid setting CRDFN_CLUSTERS_FILE: /));
    assert.throws(() => load({ CRDFN_CLUSTER: "not/an/id" }), oneLine(/^invalid setting CRDFN_CLUSTER: /));
  });
});

const secret = Buffer.alloc(32, 3).toString("base64");
const one: ClusterRegistry = new Map([["prod", { auth: "in-cluster" }]]);
const two: ClusterRegistry = new Map([
  ["a", { auth: "in-cluster" }],
  ["b", { auth: "in-cluster" }],
]);
const errorOf = (f: () => unknown): string => {
  try {
    f();
  } catch (e) {
    return (e as Error).message;
  }
  return "no error";
};

describe("CRDFN_EVENT_KEYS", () => {
  const G = ["greetings.example.com"];
  it("one cluster: keys without the cluster's part are its own; two kids while a key rotates", () => {
    const keys = loadEventKeyrings(`old:${secret},new:${secret}`, one, G);
    assert.deepEqual([...keys.get("prod")!.get("greetings.example.com")!.keys()], ["old", "new"]);
  });
  it("several clusters: each its own keys, and every cluster needs one", () => {
    const keys = loadEventKeyrings(`a/k1:${secret},b/k1:${secret}`, two, G);
    assert.deepEqual([...keys.keys()], ["a", "b"]);
    assert.equal(
      errorOf(() => loadEventKeyrings(`a/k1:${secret}`, two, G)),
      'invalid setting CRDFN_EVENT_KEYS: no key for operator greetings.example.com of cluster "b"',
    );
    assert.equal(
      errorOf(() => loadEventKeyrings(`a/k1:${secret},b/k1:${secret},c/k1:${secret}`, two, G)),
      'invalid setting CRDFN_EVENT_KEYS: names cluster "c", which is not in the registry',
    );
    assert.match(
      errorOf(() => loadEventKeyrings(`k1:${secret}`, two, G)),
      /^invalid setting CRDFN_EVENT_KEYS: key 1 names no cluster/,
    );
  });
  it("several operators in one process: each its own keys by its resource, the same kid for each; others' items not loaded", () => {
    const other = Buffer.alloc(32, 9).toString("base64");
    const ops = ["greetings.example.com", "crontabs.stable.example.com"];
    const keys = loadEventKeyrings(
      `greetings.example.com:k1:${secret},crontabs.stable.example.com:k1:${other},prod/crontabs.stable.example.com:k2:${other},widgets.example.com:k1:${other}`,
      one,
      ops,
    );
    const rings = keys.get("prod")!;
    assert.deepEqual([...rings.keys()], ops, "widgets' key is not loaded: no operator here is widgets'");
    assert.deepEqual([...rings.get("crontabs.stable.example.com")!.keys()], ["k1", "k2"]);
    assert.notDeepEqual(
      (rings.get("greetings.example.com")!.get("k1") as KeyObject).export(),
      (rings.get("crontabs.stable.example.com")!.get("k1") as KeyObject).export(),
      "one kid, a key per operator",
    );
    assert.equal(
      errorOf(() => loadEventKeyrings(`greetings.example.com:k1:${secret}`, one, ops)),
      'invalid setting CRDFN_EVENT_KEYS: no key for operator crontabs.stable.example.com of cluster "prod"',
    );
    assert.equal(
      errorOf(() => loadEventKeyrings(`greetings.example.com:k1:${secret},k1:${secret}`, one, ops)),
      'invalid setting CRDFN_EVENT_KEYS: key id "k1" is given both for operator greetings.example.com and for every operator of cluster "prod"',
    );
    assert.match(
      errorOf(() => loadEventKeyrings(`Greetings:k1:${secret}`, one, ops)),
      /^invalid setting CRDFN_EVENT_KEYS: key 1 \(cluster "prod"\): "Greetings" is not an operator's resource/,
    );
  });
  it("missing or bad: one line naming the setting, never the secret", () => {
    assert.match(
      errorOf(() => loadEventKeyrings(undefined, one, G)),
      /^invalid setting CRDFN_EVENT_KEYS: required: /,
    );
    const short = Buffer.alloc(8, 1).toString("base64");
    const message = errorOf(() => loadEventKeyrings(`k1:${short}`, one, G));
    assert.match(message, /^invalid setting CRDFN_EVENT_KEYS: key 1 \(cluster "prod"\): the secret of key "k1" has 8 bytes/);
    assert.ok(!message.includes(short));
    assert.equal(message.split("\n").length, 1);
  });
});
