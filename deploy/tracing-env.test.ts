import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { parse } from "yaml";
import { deployFiles } from "./files.ts";
import { parseDeploySettings } from "./settings.ts";
import { ConfigError } from "../core/config-error.ts";
import { defineOperator, type Operator } from "../core/operator.ts";
import { z } from "zod";

const greeting = defineOperator({
  resource: { group: "example.com", version: "v1", plural: "greetings", kind: "Greeting" },
  spec: z.object({}),
  reconcile: () => ({}),
}) as Operator<unknown>;

const lambda = {
  project: "shop",
  cluster: "prod",
  namespaces: ["default"],
  bridge: { image: "registry.example.com/shop/crdfn-bridge:0.1.0" },
  queues: { urlBase: "https://sqs.eu-west-1.amazonaws.com/123456789012" },
};

type Env = Array<{ name: string; value?: string }>;
const bridgeEnv = (files: Map<string, string>): Env => {
  const docs = (files.get("bridge/deployment.yaml") ?? [...files].find(([f, t]) => f.startsWith("bridge/") && t.includes("kind: Deployment"))?.[1])!;
  const d = parse(docs) as { spec: { template: { spec: { containers: Array<{ env: Env }> } } } };
  return d.spec.template.spec.containers[0]!.env;
};
const functionEnv = (files: Map<string, string>): Record<string, string> =>
  Object.values(parse(files.get("serverless/functions.yml")!) as Record<string, { environment: Record<string, string> }>)[0]!.environment;

describe("tracing in the deploy files", () => {
  const generate = (tracing?: unknown) =>
    deployFiles([{ operator: greeting, handler: "lambda.handler" }], parseDeploySettings({ ...lambda, ...(tracing ? { tracing } : {}) }, "crdfn.deploy.yaml"));

  it("none asked for: no OTEL_ variable anywhere", () => {
    const files = generate();
    assert.ok(!bridgeEnv(files).some((e) => e.name.startsWith("OTEL_")));
    assert.ok(!Object.keys(functionEnv(files)).some((k) => k.startsWith("OTEL_")));
  });

  it("an endpoint and a ratio: the bridge samples by ratio, parent-based; the functions export to theirs", () => {
    const files = generate({ endpoint: "http://otel-collector.observability:4318", functionsEndpoint: "http://localhost:4318", sampleRatio: 0.1 });
    const env = Object.fromEntries(bridgeEnv(files).map((e) => [e.name, e.value]));
    assert.equal(env.OTEL_EXPORTER_OTLP_ENDPOINT, "http://otel-collector.observability:4318");
    assert.equal(env.OTEL_TRACES_SAMPLER, "parentbased_traceidratio");
    assert.equal(env.OTEL_TRACES_SAMPLER_ARG, "0.1");
    assert.equal(functionEnv(files).OTEL_EXPORTER_OTLP_ENDPOINT, "http://localhost:4318");
  });

  it("on Cloud Run: the function's environment_variables carry its endpoint, and nothing without one", () => {
    const cloudrun = (tracing?: unknown) => {
      const s = parseDeploySettings(
        {
          ...lambda,
          queues: undefined,
          target: "cloudrun",
          gcp: { project: "my-project", region: "europe-west1", gkeCluster: "prod" },
          ...(tracing ? { tracing } : {}),
        },
        "crdfn.deploy.yaml",
      );
      const tf = JSON.parse(deployFiles([{ operator: greeting, handler: "greeting" }], s, new Map(), process.cwd()).get("gcp/main.tf.json")!) as {
        resource: { google_cloudfunctions2_function: Record<string, { service_config: { environment_variables: Record<string, string> } }> };
      };
      return Object.values(tf.resource.google_cloudfunctions2_function)[0]!.service_config.environment_variables;
    };
    assert.ok(!Object.keys(cloudrun()).some((k) => k.startsWith("OTEL_")));
    assert.equal(cloudrun({ endpoint: "http://otel-collector.observability:4318" }).OTEL_EXPORTER_OTLP_ENDPOINT, "http://otel-collector.observability:4318");
  });

  it("a bad endpoint or ratio is one line naming the setting", () => {
    assert.throws(
      () => generate({ endpoint: "collector:4318" }),
      (e: unknown) => e instanceof ConfigError && /^crdfn\.deploy\.yaml: tracing\.endpoint: must be an OTLP\/HTTP base URL/.test(e.message),
    );
    assert.throws(() => generate({ endpoint: "http://c:4318", sampleRatio: 2 }), /crdfn\.deploy\.yaml: tracing\.sampleRatio/);
  });
});
