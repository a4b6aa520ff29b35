// Validation at admission, on a real API server with the real kubectl: the README's operator and
// one more, each written with crdfn's helpers; their generated CRDs installed as `crdfn crd`
// prints them. A broken CEL rule and a changed immutable field are refused with the rule's
// message; a PodTemplateSpec, an embedded object and free-form values come back exactly as written.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { z } from "zod";
import { cel, defineOperator, embedded, type Operator } from "../core/index.ts";
import { crdFiles } from "../deploy/crd.ts";
import { loadOperator } from "../cli/operators.ts";
import { testCluster, type TestCluster } from "./support/test-cluster.ts";
import { packageRoot } from "../emulator/paths.ts";
import { eventually } from "./support/eventually.ts";
import { adminKubectl, type Kubectl } from "./support/identities.ts";

/** The ```ts file=webapp.ts block of docs/contract.md's "Validation at admission". */
function readmeOperator(): string {
  const readme = readFileSync(join(packageRoot, "docs", "contract.md"), "utf8");
  const start = readme.indexOf("## Validation at admission");
  assert.ok(start >= 0, 'docs/contract.md has no "Validation at admission" section');
  const section = readme.slice(start, readme.indexOf("\n## ", start + 3));
  const block = /```ts file=webapp\.ts\n([\s\S]*?)```/.exec(section);
  assert.ok(block, "the section has no ```ts file=webapp.ts block");
  return block[1]!;
}

/** More of the helpers and the unions a CRD can say. */
const widget = defineOperator({
  resource: { group: "admission.example.com", version: "v1", plural: "widgets", kind: "Widget" },
  spec: z.object({
    size: cel(z.number().int(), "self % 2 == 0", {
      messageExpression: "self > 100 ? 'size must be even (and is large)' : 'size must be even'",
      reason: "FieldValueForbidden",
    }),
    shape: z
      .discriminatedUnion("kind", [
        z.object({ kind: z.literal("circle"), radius: z.number() }),
        z.object({ kind: z.literal("rect"), width: z.number(), height: z.number() }),
      ])
      .optional(),
    config: embedded().optional(),
    level: z.enum(["low", "high"]).nullable().optional(),
    extra: z.unknown(),
    // YAML 1.1 (kubectl's) reads an unquoted `on` as true: the generated CRD quotes it.
    on: z.boolean().optional(),
  }),
  reconcile: () => ({}),
});

const NS = "default";
const manifest = (apiVersion: string, kind: string, name: string, spec: Record<string, unknown>) =>
  JSON.stringify({ apiVersion, kind, metadata: { name, namespace: NS }, spec });

describe("validation at admission, on a real API server", { timeout: 240_000 }, () => {
  let cluster: TestCluster;
  let kubectl: Kubectl;
  let folder: string;
  let webapp: Operator<unknown>;

  /** kubectl apply (server-side, as a person would, with kubectl's default strict field validation). */
  const apply = (json: string) => kubectl(["apply", "--server-side", "--field-manager=person", "-f", "-"], json);
  /** What the API server answered when it refused. */
  const refusal = async (json: string): Promise<string> => {
    try {
      await apply(json);
    } catch (e) {
      return String((e as { stderr?: string }).stderr);
    }
    return assert.fail(`accepted: ${json}`);
  };
  const specOf = async (resource: string, name: string) =>
    (JSON.parse(await kubectl(["get", resource, name, "-n", NS, "-o", "json"])) as { spec: Record<string, unknown> }).spec;

  const app = (name: string, spec: Record<string, unknown>) => manifest("demo.example.com/v1", "WebApp", name, spec);
  const template = {
    metadata: { labels: { app: "web", tier: "frontend" } },
    spec: {
      containers: [
        {
          name: "web",
          image: "nginx:1.27",
          env: [
            { name: "MODE", value: "production" },
            { name: "POD_IP", valueFrom: { fieldRef: { fieldPath: "status.podIP" } } },
          ],
          resources: { requests: { cpu: "250m", memory: "64Mi" }, limits: { memory: "128Mi" } },
          ports: [{ containerPort: 8080, protocol: "TCP" }],
          futureField: { nested: [1, "two", { three: true }] },
        },
      ],
      securityContext: { runAsNonRoot: true },
      "example.com/not-a-pod-field": "kept",
    },
  };
  const base = { minReplicas: 1, maxReplicas: 3, storageClass: "fast", port: 8080, template };

  before(async () => {
    mkdirSync(join(packageRoot, ".crdfn"), { recursive: true });
    // Inside the checkout, like a user's project with crdfn installed, so `import "crdfn"` resolves.
    folder = mkdtempSync(join(packageRoot, ".crdfn", "crd-validation-"));
    writeFileSync(join(folder, "webapp.ts"), readmeOperator());
    webapp = await loadOperator(join(folder, "webapp.ts"));
    cluster = await testCluster({ file: import.meta.filename });
    kubectl = adminKubectl(cluster);
    const crds = join(folder, "crds.yaml");
    writeFileSync(crds, [...crdFiles([webapp, widget]).values()].join("---\n"));
    await kubectl(["apply", "-f", crds]);
    await kubectl(["wait", "--for=condition=Established", "crd/webapps.demo.example.com", "crd/widgets.admission.example.com", "--timeout=60s"]);
  });
  after(async () => {
    await cluster?.stop();
    if (folder) rmSync(folder, { recursive: true, force: true });
  });

  it("the README's operator type-checks under the project's strict settings", () => {
    writeFileSync(join(folder, "tsconfig.json"), JSON.stringify({ extends: "../../tsconfig.json", include: ["*.ts"] }));
    execFileSync(join(packageRoot, "node_modules", ".bin", "tsc"), ["--noEmit", "-p", folder], { encoding: "utf8" });
  });

  it("a PodTemplateSpec round-trips exactly: labels, containers with env and resources, fields no schema names", async () => {
    // The first apply after the CRD is Established may precede kubectl's discovery of the kind.
    await eventually(() => apply(app("web", base)), { timeoutMs: 30_000, intervalMs: 500 });
    const stored = await specOf("webapp", "web");
    assert.deepEqual(stored.template, template);
    // And reconcile reads it so: zod's parse of the stored spec keeps the template as it is.
    assert.deepEqual((webapp.spec.parse(stored) as { template: unknown }).template, template);
  });

  it("refuses a spec breaking the resource's CEL rule, with the rule's message", async () => {
    const out = await refusal(app("inverted", { ...base, minReplicas: 5, maxReplicas: 2 }));
    assert.match(out, /The WebApp "inverted" is invalid: spec: Invalid value: "object": minReplicas must not exceed maxReplicas/);
  });

  it("refuses a field breaking its cel() rule, with its message", async () => {
    const out = await refusal(app("huge", { ...base, maxReplicas: 80 }));
    assert.match(out, /spec\.maxReplicas: Invalid value: "integer": at most 50 replicas/);
  });

  it("refuses a change to an immutable field", async () => {
    const out = await refusal(app("web", { ...base, storageClass: "slow" }));
    assert.match(out, /spec\.storageClass: Invalid value: "string": storageClass is immutable/);
    assert.equal((await specOf("webapp", "web")).storageClass, "fast");
  });

  it("refuses adding, changing or removing an optional immutable field; an unchanged one passes", async () => {
    const added = await refusal(app("web", { ...base, zone: "eu-1a" }));
    assert.match(added, /spec\.zone: Invalid value: "object": zone is immutable: it cannot be added or removed after creation/);

    await apply(app("zoned", { ...base, zone: "eu-1a" }));
    assert.match(await refusal(app("zoned", { ...base, zone: "eu-1b" })), /spec\.zone: Invalid value: "string": zone is immutable/);
    assert.match(await refusal(app("zoned", base)), /spec\.zone: Invalid value: "object": zone is immutable: it cannot be added or removed after creation/);
    await apply(app("zoned", { ...base, zone: "eu-1a", maxReplicas: 4 }));
    assert.equal((await specOf("webapp", "zoned")).maxReplicas, 4);
  });

  it("checks the template's typed part, and the int-or-string port's type", async () => {
    const labels = await refusal(app("badlabels", { ...base, template: { ...template, metadata: { labels: { app: 7 } } } }));
    // Server-side apply types the patch by the CRD's schema first, and says so in its words.
    assert.match(labels, /\.spec\.template\.metadata\.labels\.app: expected string/);
    await apply(app("named-port", { ...base, port: "http" }));
    assert.match(await refusal(app("float-port", { ...base, port: 80.5 })), /spec\.port/);
  });

  it("a messageExpression with a reason", async () => {
    const out = await refusal(manifest("admission.example.com/v1", "Widget", "odd", { size: 3 }));
    assert.match(out, /spec\.size: Forbidden: size must be even/);
  });

  it("a discriminated union: the discriminator selects the required fields", async () => {
    const w = (name: string, shape: unknown) => manifest("admission.example.com/v1", "Widget", name, { size: 2, shape });
    await eventually(() => apply(w("round", { kind: "circle", radius: 1.5 })), { timeoutMs: 30_000, intervalMs: 500 });
    assert.match(await refusal(w("squareish", { kind: "rect", width: 2 })), /spec\.shape\.height: Required value: height is required when kind is rect/);
    assert.match(await refusal(w("flat", { kind: "circle" })), /spec\.shape\.radius: Required value: radius is required when kind is circle/);
    assert.match(await refusal(w("hexagon", { kind: "hexagon" })), /spec\.shape\.kind: Unsupported value: "hexagon"/);
  });

  it("an embedded object round-trips, with its apiVersion and kind required and its metadata validated", async () => {
    const config = {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "settings", labels: { a: "b" } },
      data: { "app.yaml": "mode: fast\n" },
      binaryData: {},
    };
    const w = (name: string, c: unknown) => manifest("admission.example.com/v1", "Widget", name, { size: 2, config: c });
    await apply(w("configured", config));
    assert.deepEqual((await specOf("widget", "configured")).config, config);
    assert.match(await refusal(w("kindless", { data: {} })), /spec\.config\.apiVersion: Required value/);
    assert.match(
      await refusal(w("badlabel", { ...config, metadata: { name: "settings", labels: { "not a key": "x" } } })),
      /spec\.config\.metadata\.labels: Invalid value: "not a key"/,
    );
  });

  it("free-form values (z.unknown()), a nullable enum and a field named on round-trip", async () => {
    const extra = { anything: [1, "two", { three: null }], at: "all" };
    await apply(manifest("admission.example.com/v1", "Widget", "loose", { size: 2, extra, level: null, on: true }));
    const stored = await specOf("widget", "loose");
    assert.deepEqual(stored.extra, extra);
    assert.equal(stored.level, null);
    assert.equal(stored.on, true);
    await apply(manifest("admission.example.com/v1", "Widget", "scalar", { size: 2, extra: 42 }));
    assert.equal((await specOf("widget", "scalar")).extra, 42);
    assert.match(await refusal(manifest("admission.example.com/v1", "Widget", "mid", { size: 2, level: "mid" })), /spec\.level: Invalid value: "mid"/);
  });
});
