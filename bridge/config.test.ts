import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { ConfigError } from "../core/config-error.ts";
import { loadBridgeConfig, loadEventKey } from "./config.ts";

const base = { CRDFN_QUEUE_URL: "http://127.0.0.1:9324/000000000000/crdfn-events.fifo", CRDFN_RESOURCES: "stable.example.com/v1/crontabs" };

function errorOf(fn: () => unknown): string {
  try {
    fn();
  } catch (e) {
    assert.ok(e instanceof ConfigError);
    return e.message;
  }
  assert.fail("expected a ConfigError");
}

describe("bridge config", () => {
  it("parses the compact resource syntax with owned kinds and the core group", () => {
    const c = loadBridgeConfig({ ...base, CRDFN_RESOURCES: "stable.example.com/v1/crontabs>batch/v1/cronjobs+v1/configmaps, example.com/v1alpha1/widgets" });
    assert.deepEqual(c.resources, [
      {
        group: "stable.example.com",
        version: "v1",
        plural: "crontabs",
        owns: [
          { group: "batch", version: "v1", plural: "cronjobs" },
          { group: "", version: "v1", plural: "configmaps" },
        ],
      },
      { group: "example.com", version: "v1alpha1", plural: "widgets", owns: [] },
    ]);
    assert.equal(c.resyncSeconds, 0, "resync is off unless asked for");
    assert.equal(c.lease.name, undefined);
  });

  it("a server and token file for a bridge outside the cluster: both or neither, https only", () => {
    const c = loadBridgeConfig({ ...base, CRDFN_KUBE_SERVER: "https://10.0.0.1:6443", CRDFN_KUBE_TOKEN_FILE: "/run/token", CRDFN_KUBE_CA_FILE: "/run/ca.crt" });
    assert.deepEqual(c.kube, { server: "https://10.0.0.1:6443", tokenFile: "/run/token", caFile: "/run/ca.crt" });
    assert.deepEqual(loadBridgeConfig(base).kube, {});
    assert.equal(
      errorOf(() => loadBridgeConfig({ ...base, CRDFN_KUBE_SERVER: "https://10.0.0.1:6443" })),
      "CRDFN_KUBE_TOKEN_FILE: needs both CRDFN_KUBE_SERVER and CRDFN_KUBE_TOKEN_FILE",
    );
    assert.equal(
      errorOf(() => loadBridgeConfig({ ...base, CRDFN_KUBE_SERVER: "http://10.0.0.1", CRDFN_KUBE_TOKEN_FILE: "/t" })),
      "CRDFN_KUBE_SERVER: must be an https:// URL",
    );
  });

  it("layers the environment over a structured file", () => {
    const file = {
      cluster: "prod",
      queue: { url: "https://sqs.eu-west-1.amazonaws.com/1/q.fifo" },
      resources: [{ group: "stable.example.com", version: "v1", plural: "crontabs", owns: [{ group: "batch", version: "v1", plural: "cronjobs" }] }],
      namespaces: ["a", "b"],
      lease: { name: "crdfn-bridge" },
    };
    const c = loadBridgeConfig({ CRDFN_NAMESPACES: "c", CRDFN_RESYNC_SECONDS: "0" }, file);
    assert.equal(c.cluster, "prod");
    assert.deepEqual(c.namespaces, ["c"]);
    assert.equal(c.resyncSeconds, 0);
    assert.equal(c.lease.name, "crdfn-bridge");
    assert.equal(c.lease.namespace, "crdfn-system");
  });

  it("names each bad setting on one line", () => {
    const msg = errorOf(() => loadBridgeConfig({ ...base, CRDFN_RESYNC_SECONDS: "abc", CRDFN_MAX_PENDING: "1", CRDFN_LEASE_DURATION_SECONDS: "60" }));
    const lines = msg.split("\n");
    assert.equal(lines.length, 3, msg);
    assert.match(msg, /^CRDFN_RESYNC_SECONDS: /m);
    assert.match(msg, /^CRDFN_MAX_PENDING: /m);
    assert.match(msg, /^CRDFN_LEASE_DURATION_SECONDS: /m);
  });

  it("says what is missing and what is malformed", () => {
    assert.equal(
      errorOf(() => loadBridgeConfig({ CRDFN_RESOURCES: "a.b/v1/xs" })),
      "CRDFN_QUEUE_URL: is required",
    );
    assert.match(
      errorOf(() => loadBridgeConfig({ ...base, CRDFN_RESOURCES: "crontabs" })),
      /^CRDFN_RESOURCES: "crontabs" is not group\/version\/plural$/,
    );
    assert.match(
      errorOf(() => loadBridgeConfig({ ...base, CRDFN_RESOURCES: "a.b/v1/CronTabs" })),
      /^CRDFN_RESOURCES \(resources\[0\]\.plural\): /,
    );
    assert.match(
      errorOf(() => loadBridgeConfig({ ...base, CRDFN_QUEUE_URL: "http://x/q" })),
      /^CRDFN_QUEUE_URL: is not a FIFO queue/,
    );
    assert.match(
      errorOf(() =>
        loadBridgeConfig({}, { resources: [{ group: "a.b", version: "1", plural: "xs" }], queue: { url: base.CRDFN_QUEUE_URL } }, "/etc/crdfn/bridge.yaml"),
      ),
      /^\/etc\/crdfn\/bridge.yaml: resources\[0\]\.version: /,
    );
  });
});

describe("a queue per resource", () => {
  const greetings = "http://127.0.0.1:9324/000000000000/greeting.fifo";

  it("takes an entry's @queue URL, leaving the others on CRDFN_QUEUE_URL", () => {
    const c = loadBridgeConfig({ ...base, CRDFN_RESOURCES: `example.com/v1/greetings>v1/configmaps@${greetings}, stable.example.com/v1/crontabs` });
    assert.deepEqual(
      c.resources.map((r) => [r.plural, r.owns.map((o) => o.plural), r.queueUrl]),
      [
        ["greetings", ["configmaps"], greetings],
        ["crontabs", [], undefined],
      ],
    );
  });

  it("holds every resource queue to FIFO, naming the resource", () => {
    assert.match(
      errorOf(() => loadBridgeConfig({ ...base, CRDFN_RESOURCES: "example.com/v1/greetings@http://127.0.0.1:9324/000000000000/greeting" })),
      /^CRDFN_RESOURCES \(resources\[0\]\.queueUrl\): is not a FIFO queue/,
    );
  });
});

describe("Pub/Sub instead of SQS", () => {
  const topic = "projects/my-project/topics/crdfn-shop-greeting-events";
  it("takes CRDFN_PUBSUB_TOPIC, a topic per resource with @projects/…, and the emulator's host", () => {
    const c = loadBridgeConfig({
      CRDFN_PUBSUB_TOPIC: topic,
      CRDFN_RESOURCES: `example.com/v1/greetings, stable.example.com/v1/crontabs@projects/my-project/topics/crdfn-shop-crontab-events`,
      PUBSUB_EMULATOR_HOST: "127.0.0.1:8085",
    });
    assert.deepEqual(c.queue, { topic });
    assert.deepEqual(
      c.resources.map((r) => [r.plural, r.topic, r.queueUrl]),
      [
        ["greetings", undefined, undefined],
        ["crontabs", "projects/my-project/topics/crdfn-shop-crontab-events", undefined],
      ],
    );
    assert.equal(c.pubsub.emulatorHost, "127.0.0.1:8085");
  });

  it("refuses in one line: a short topic name, both services at once, a queue on a Pub/Sub bridge, neither", () => {
    assert.equal(
      errorOf(() => loadBridgeConfig({ CRDFN_PUBSUB_TOPIC: "events", CRDFN_RESOURCES: base.CRDFN_RESOURCES })),
      "CRDFN_PUBSUB_TOPIC: must be a full topic name, projects/<project>/topics/<topic>",
    );
    assert.match(
      errorOf(() => loadBridgeConfig({ ...base, CRDFN_PUBSUB_TOPIC: topic })),
      /^CRDFN_PUBSUB_TOPIC: one bridge publishes to SQS or to Pub\/Sub/,
    );
    assert.match(
      errorOf(() => loadBridgeConfig({ CRDFN_PUBSUB_TOPIC: topic, CRDFN_RESOURCES: `${base.CRDFN_RESOURCES}@${base.CRDFN_QUEUE_URL}` })),
      /^CRDFN_RESOURCES \(resources\[0\]\.queueUrl\): is an SQS queue, but this bridge publishes to Pub\/Sub/,
    );
    assert.match(
      errorOf(() => loadBridgeConfig({ ...base, CRDFN_RESOURCES: `${base.CRDFN_RESOURCES}@${topic}` })),
      /^CRDFN_RESOURCES \(resources\[0\]\.topic\): is a Pub\/Sub topic, but this bridge publishes to SQS/,
    );
    assert.match(
      errorOf(() => loadBridgeConfig({}, { queue: {}, resources: [{ group: "a.b", version: "v1", plural: "xs" }] })),
      /^CRDFN_QUEUE_URL: is required \(or CRDFN_PUBSUB_TOPIC, to publish to Pub\/Sub\)$/,
    );
  });
});

describe("CRDFN_EVENT_KEY", () => {
  it("is the bridge's one signing key, <kid>:<secret>; missing or bad is one line naming it, never the secret", () => {
    const secret = Buffer.alloc(32, 4).toString("base64");
    assert.equal(loadEventKey({ CRDFN_EVENT_KEY: `k1:${secret}` }).kid, "k1");
    assert.match(
      errorOf(() => loadEventKey({})),
      /^CRDFN_EVENT_KEY: is required: /,
    );
    const bad = errorOf(() => loadEventKey({ CRDFN_EVENT_KEY: secret }));
    assert.match(bad, /^CRDFN_EVENT_KEY: must be <kid>:<secret>/);
    assert.ok(!bad.includes(secret));
  });
});
