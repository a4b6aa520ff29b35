// `crdfn generate` for Cloud Run functions (target: cloudrun), proven without a Google Cloud
// account: `terraform validate` needs the google provider, which this machine cannot download
// (registry.terraform.io is out of reach; /opt/tf-plugins holds only hashicorp/aws), so the
// Terraform JSON is checked here by a parser: every reference resolves, every argument is one the
// provider documents for its resource type, and the guarantees crdfn depends on (ordering, dead
// letters, retry policy, push authentication, least privilege) are there. The Kubernetes side
// (the function's Google identity bound to its grants and admission policy in GKE) is applied
// to a real API server and tried.
import { execFile, spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, isAbsolute, join, resolve } from "node:path";
import { promisify } from "node:util";
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { parse, parseAllDocuments, stringify } from "yaml";
import { loadBridgeConfig } from "../bridge/config.ts";
import { generate, writeGenerated, type Generated } from "../cli/generate/generate.ts";
import { LOG_COUNTERS, LOG_DISTRIBUTIONS, METRIC_MARKER } from "../core/cloud-logging-metrics.ts";
import { ConfigError } from "../core/config-error.ts";
import { parseDeploySettings } from "../deploy/settings.ts";
import { startCluster, type LocalCluster } from "../emulator/cluster.ts";
import { freePort } from "../emulator/ports.ts";
import { cloudLoggingMetrics } from "../functions/adapters/cloud-logging.ts";
import { loadPushSettings } from "../functions/adapters/push.ts";
import { loadClusterRegistry, loadEventKeyrings } from "../functions/clusters/registry.ts";
import { loadConfig } from "../functions/runtime/config.ts";
import { eventually } from "./support/eventually.ts";

const run = promisify(execFile);

/** Runs a program with `input` on its stdin, as Terraform's external data source does; its stdout. */
function runWithStdin(file: string, args: string[], cwd: string, input: string): Promise<string> {
  return new Promise((resolvePromise, reject) => {
    const child = execFile(file, args, { cwd, maxBuffer: 16 * 1024 * 1024 }, (error, stdout, stderr) =>
      error ? reject(new Error(`${error.message}\n${stderr}`)) : resolvePromise(stdout),
    );
    child.stdin?.end(input);
  });
}
const root = join(import.meta.dirname, "..");
type Json = Record<string, unknown>;

/**
 * The arguments (nested blocks as objects) the google provider documents for each resource and
 * data source used (registry.terraform.io/providers/hashicorp/google/latest/docs, read in the
 * provider's website/docs/r|d/*.html.markdown; archive_file from hashicorp/archive).
 */
const SCHEMA: Record<string, Json> = {
  google_project_service: { service: 1, project: 1, disable_on_destroy: 1, disable_dependent_services: 1 },
  google_storage_bucket: {
    name: 1,
    location: 1,
    force_destroy: 1,
    uniform_bucket_level_access: 1,
    public_access_prevention: 1,
    project: 1,
    labels: 1,
    storage_class: 1,
  },
  google_storage_bucket_object: { name: 1, bucket: 1, source: 1, content: 1, content_type: 1 },
  google_service_account: { account_id: 1, display_name: 1, description: 1, disabled: 1, project: 1 },
  google_service_account_iam_member: { service_account_id: 1, role: 1, member: 1, condition: 1 },
  google_pubsub_topic: { name: 1, project: 1, labels: 1, kms_key_name: 1, message_retention_duration: 1, message_storage_policy: 1, schema_settings: 1 },
  google_pubsub_subscription: {
    name: 1,
    topic: 1,
    project: 1,
    labels: 1,
    ack_deadline_seconds: 1,
    message_retention_duration: 1,
    retain_acked_messages: 1,
    expiration_policy: { ttl: 1 },
    filter: 1,
    enable_message_ordering: 1,
    enable_exactly_once_delivery: 1,
    retry_policy: { minimum_backoff: 1, maximum_backoff: 1 },
    dead_letter_policy: { dead_letter_topic: 1, max_delivery_attempts: 1 },
    push_config: { push_endpoint: 1, attributes: 1, oidc_token: { service_account_email: 1, audience: 1 }, no_wrapper: { write_metadata: 1 } },
  },
  google_pubsub_topic_iam_member: { topic: 1, role: 1, member: 1, project: 1, condition: 1 },
  google_pubsub_subscription_iam_member: { subscription: 1, role: 1, member: 1, project: 1, condition: 1 },
  google_project_iam_member: { project: 1, role: 1, member: 1, condition: 1 },
  google_cloudfunctions2_function: {
    name: 1,
    location: 1,
    description: 1,
    project: 1,
    labels: 1,
    kms_key_name: 1,
    build_config: {
      runtime: 1,
      entry_point: 1,
      environment_variables: 1,
      docker_repository: 1,
      service_account: 1,
      worker_pool: 1,
      source: { storage_source: { bucket: 1, object: 1, generation: 1 }, repo_source: 1 },
    },
    service_config: {
      max_instance_count: 1,
      min_instance_count: 1,
      available_memory: 1,
      available_cpu: 1,
      timeout_seconds: 1,
      max_instance_request_concurrency: 1,
      environment_variables: 1,
      ingress_settings: 1,
      all_traffic_on_latest_revision: 1,
      service_account_email: 1,
      vpc_connector: 1,
      vpc_connector_egress_settings: 1,
      secret_environment_variables: 1,
      secret_volumes: 1,
    },
    event_trigger: 1,
  },
  google_cloud_run_service_iam_member: { location: 1, service: 1, role: 1, member: 1, project: 1, condition: 1 },
  google_secret_manager_secret_iam_member: { secret_id: 1, role: 1, member: 1, project: 1, condition: 1 },
  google_logging_metric: {
    name: 1,
    description: 1,
    filter: 1,
    disabled: 1,
    project: 1,
    bucket_name: 1,
    metric_descriptor: { metric_kind: 1, value_type: 1, unit: 1, display_name: 1, labels: { key: 1, value_type: 1, description: 1 } },
    label_extractors: 1,
    value_extractor: 1,
    bucket_options: { linear_buckets: 1, exponential_buckets: { num_finite_buckets: 1, growth_factor: 1, scale: 1 }, explicit_buckets: { bounds: 1 } },
  },
  "data.google_project": { project_id: 1 },
  "data.google_container_cluster": { name: 1, location: 1, project: 1 },
  "data.archive_file": { type: 1, source_dir: 1, source_file: 1, output_path: 1, excludes: 1 },
  // hashicorp/external
  "data.external": { program: 1, working_dir: 1, query: 1 },
};
/** Attributes referenced on resources that are computed (not arguments). */
const ATTRIBUTES: Record<string, string[]> = {
  google_pubsub_topic: ["id", "name"],
  google_pubsub_subscription: ["id"],
  google_service_account: ["email", "name", "id"],
  google_cloudfunctions2_function: ["name", "service_config[0].uri"],
  google_storage_bucket: ["name"],
  google_storage_bucket_object: ["name"],
  "data.google_project": ["number"],
  "data.google_container_cluster": ["endpoint", "master_auth[0].cluster_ca_certificate"],
  "data.archive_file": ["output_md5", "output_path"],
  "data.external": ["result.dir"],
};
const META = new Set(["depends_on", "count", "for_each", "lifecycle", "provider"]);

/** Argument names not in the provider's schema, as paths. */
function unknownArguments(type: string, value: unknown, schema: Json, path: string): string[] {
  if (Array.isArray(value)) return value.flatMap((v, i) => unknownArguments(type, v, schema, `${path}[${i}]`));
  if (typeof value !== "object" || value === null) return [];
  const out: string[] = [];
  for (const [k, v] of Object.entries(value as Json)) {
    if (META.has(k) && path.split(".").length === 2) continue;
    const s = schema[k];
    if (s === undefined) out.push(`${path}.${k}`);
    else if (typeof s === "object") out.push(...unknownArguments(type, v, s as Json, `${path}.${k}`));
  }
  return out;
}

/** Every `${…}` expression in the document's strings. */
function expressions(value: unknown): string[] {
  if (typeof value === "string") return [...value.matchAll(/\$\{([^}]*)\}/g)].map((m) => m[1]!);
  if (Array.isArray(value)) return value.flatMap(expressions);
  if (value && typeof value === "object") return Object.values(value).flatMap(expressions);
  return [];
}

describe("crdfn generate for Cloud Run functions (offline)", { timeout: 240_000 }, () => {
  let dir: string;
  let g: Generated;
  let tf: {
    resource: Record<string, Record<string, Json>>;
    data: Record<string, Record<string, Json>>;
    variable: Json;
    locals: Json;
    output: Record<string, Json>;
  };
  const res = (type: string) => tf.resource[type] ?? {};
  const project = "crdfn-example";
  const settings = {
    project: "shop",
    target: "cloudrun",
    operators: [{ module: join(root, "examples/greeting/operator.ts") }, { module: join(root, "examples/crontab/operator.ts"), function: "crontab-http" }],
    out: "deploy",
    cluster: "prod",
    namespaces: ["default", "demo"],
    bridge: { image: "europe-west1-docker.pkg.dev/crdfn-example/crdfn/bridge:0.1.0" },
    gcp: { project, region: "europe-west1", gkeCluster: "prod-gke" },
  };

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "crdfn-gcp-"));
    writeFileSync(join(dir, "crdfn.deploy.yaml"), stringify(settings));
    writeFileSync(join(dir, "package.json"), JSON.stringify({ name: "shop", type: "module", main: "http.ts" }));
    writeFileSync(join(dir, "http.ts"), "// registers each operator's function\n");
    g = await generate([], { settings: "crdfn.deploy.yaml" }, dir);
    writeGenerated(g);
    tf = JSON.parse(g.files.get("gcp/main.tf.json")!) as typeof tf;
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it("refuses, in one line, what it cannot know and a source without a main", async () => {
    const { gcp: _gcp, ...noGcp } = settings;
    assert.throws(
      () => parseDeploySettings(noGcp, "crdfn.deploy.yaml", { "gcp.project": "--gcp-project" }),
      (e: Error) =>
        e instanceof ConfigError &&
        /^crdfn\.deploy\.yaml: set gcp\.project \(--gcp-project; .*\), gcp\.region \(.*\), gcp\.gkeCluster \(.*\): crdfn cannot know them and writes no placeholder$/.test(
          e.message,
        ),
    );
    writeFileSync(join(dir, "package.json"), JSON.stringify({ name: "shop" }));
    try {
      await assert.rejects(
        generate([], { settings: "crdfn.deploy.yaml" }, dir),
        /^SetupError: package\.json: set "main" to the module that registers each operator's function/,
      );
    } finally {
      writeFileSync(join(dir, "package.json"), JSON.stringify({ name: "shop", type: "module", main: "http.ts" }));
    }
    assert.ok(!g.files.has("serverless/resources.yml"), "no Serverless resources for Cloud Run");
  });

  it("every reference resolves, and every argument is one the google provider documents", () => {
    const declared = new Set<string>();
    for (const [type, byName] of Object.entries(tf.resource)) {
      for (const [name, body] of Object.entries(byName)) {
        declared.add(`${type}.${name}`);
        assert.ok(SCHEMA[type], `resource type ${type} is known`);
        assert.deepEqual(unknownArguments(type, body, SCHEMA[type], `${type}.${name}`), []);
        for (const dep of (body.depends_on as string[] | undefined) ?? [])
          assert.ok(dep.split(".").length === 2 && tf.resource[dep.split(".")[0]!]?.[dep.split(".")[1]!], `depends_on ${dep} exists`);
      }
    }
    for (const [type, byName] of Object.entries(tf.data)) {
      for (const [name, body] of Object.entries(byName)) {
        declared.add(`data.${type}.${name}`);
        assert.deepEqual(unknownArguments(type, body, SCHEMA[`data.${type}`]!, `data.${type}.${name}`), []);
      }
    }
    const refs = expressions(tf);
    assert.ok(refs.length > 20);
    for (const e of refs) {
      for (const m of e.matchAll(/\b(data\.)?((?:google|archive)_[a-z0-9_]+|(?<=data\.)external)\.([a-z0-9_]+)\.([a-z0-9_.[\]]+)/g)) {
        const type = `${m[1] ?? ""}${m[2]}`;
        assert.ok(declared.has(`${type}.${m[3]}`), `${m[0]} names a declared ${type}`);
        assert.ok((ATTRIBUTES[type] ?? []).includes(m[4]!) || Object.hasOwn(SCHEMA[type] ?? {}, m[4]!), `${m[0]}: ${m[4]} is an attribute of ${type}`);
      }
      for (const m of e.matchAll(/\bvar\.([a-z_]+)/g)) assert.ok(Object.hasOwn(tf.variable, m[1]!), `var.${m[1]} is declared`);
      for (const m of e.matchAll(/\blocal\.([a-z_]+)/g)) assert.ok(Object.hasOwn(tf.locals, m[1]!), `local.${m[1]} is declared`);
      const rest = e
        .replace(
          /\b(data\.)?(google|archive)_[a-z0-9_]+\.[a-z0-9_]+\.[a-z0-9_.[\]]+|\bdata\.external\.[a-z0-9_]+\.result\.[a-z_]+|\b(var|local)\.[a-z_]+|\bpath\.module\b|jsonencode\(|abspath\(|\)/g,
          "",
        )
        .trim();
      assert.equal(rest, "", `nothing else in \${${e}}`);
    }
    assert.equal(tf.variable.source_dir && (tf.variable.source_dir as Json).default, "../..", "the source folder, seen from deploy/gcp");
    assert.equal((tf.data.archive_file!.source as Json).source_dir, "${data.external.source.result.dir}", "the upload is the bundle, not the project folder");
    assert.equal((tf.data.external!.source as Json).working_dir, "${var.source_dir}", "bundled from the source folder");
  });

  it(
    "the upload is self-contained: Terraform's bundle step on a project that depends on crdfn by file: gives a folder Cloud Build installs from the registry, and functions-framework serves the function from it",
    { timeout: 180_000 },
    async () => {
      const project = mkdtempSync(join(tmpdir(), "crdfn-gcp-upload-"));
      try {
        // A project as `crdfn init` makes it from crdfn's tarball: crdfn installed from file:, main http.ts.
        mkdirSync(join(project, "node_modules"));
        symlinkSync(root, join(project, "node_modules", "crdfn"));
        for (const dep of ["zod", "@google-cloud"]) symlinkSync(join(root, "node_modules", dep), join(project, "node_modules", dep));
        writeFileSync(
          join(project, "package.json"),
          JSON.stringify({ name: "shop", type: "module", main: "http.ts", dependencies: { crdfn: "file:../crdfn-0.1.0.tgz", zod: "^4.0.0" } }),
        );
        writeFileSync(join(project, "operator.ts"), readFileSync(join(root, "examples/greeting/operator.ts"), "utf8"));
        writeFileSync(join(project, "http.ts"), readFileSync(join(root, "examples/greeting/http.ts"), "utf8"));
        writeFileSync(join(project, "crdfn.deploy.yaml"), stringify({ ...settings, operators: [{ module: "operator.ts" }] }));
        const generated = await generate([], { settings: "crdfn.deploy.yaml" }, project);
        writeGenerated(generated);
        const gcpDir = join(generated.outDir, "gcp");
        const main = JSON.parse(readFileSync(join(gcpDir, "main.tf.json"), "utf8")) as typeof tf;
        const step = main.data.external!.source as { program: string[]; working_dir: string; query: Record<string, string> };
        assert.deepEqual(step.program, ["npx", "--no", "crdfn", "bundle", "--terraform"], "the project's own crdfn, never a download");
        // As Terraform runs it: from working_dir (resolved from <out>/gcp), the query on stdin.
        const cwd = resolve(gcpDir, step.working_dir.replace("${var.source_dir}", (main.variable.source_dir as Json).default as string));
        assert.equal(cwd, project);
        const out = step.query.out!.replace("${abspath(path.module)}", gcpDir);
        const bundled = await runWithStdin(
          process.execPath,
          ["--conditions=crdfn-source", join(root, "cli/main.ts"), ...step.program.slice(3)],
          cwd,
          JSON.stringify({ out }),
        );
        const result = JSON.parse(bundled) as Record<string, unknown>;
        assert.ok(
          Object.values(result).every((v) => typeof v === "string"),
          "the external protocol: a map of strings",
        );
        assert.equal(result.dir, out);
        const manifest = JSON.parse(readFileSync(join(out, "package.json"), "utf8")) as { main: string; dependencies: Record<string, string> };
        assert.deepEqual(Object.keys(manifest.dependencies).sort(), ["@google-cloud/functions-framework", "@google-cloud/pubsub"]);
        for (const [name, version] of Object.entries(manifest.dependencies))
          assert.match(version, /^\d+\.\d+\.\d+/, `${name}: a registry version, not ${version}`);
        assert.deepEqual(readdirSync(out).sort(), [manifest.main, "package.json"].sort(), "nothing but the bundle and its manifest");
        // What Cloud Build does with the upload: install from the registry, then serve the entry point.
        await run("npm", ["install", "--omit=dev", "--no-audit", "--no-fund", "--prefer-offline"], { cwd: out, maxBuffer: 16 * 1024 * 1024 });
        const port = await freePort();
        const served = spawn(
          process.execPath,
          [join(out, "node_modules/@google-cloud/functions-framework/build/src/main.js"), "--target=greeting", `--port=${port}`],
          { cwd: out, env: { PATH: process.env.PATH, HOME: process.env.HOME }, stdio: ["ignore", "pipe", "pipe"] },
        );
        let log = "";
        served.stdout.on("data", (d: Buffer) => (log += d.toString()));
        served.stderr.on("data", (d: Buffer) => (log += d.toString()));
        try {
          const answer = await eventually(
            async () => {
              if (served.exitCode !== null) throw new Error(`functions-framework exited: ${log}`);
              const r = await fetch(`http://127.0.0.1:${port}/`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
              return { status: r.status, body: (await r.json()) as { result?: string; detail?: string } };
            },
            { timeoutMs: 60_000 },
          );
          assert.match(log, /Function: greeting/);
          // crdfn's handler answered: without the Secret Manager key it names that setting, as deployed without the secret.
          assert.equal(answer.body.result, "misconfigured", JSON.stringify(answer.body));
          assert.match(answer.body.detail ?? "", /CRDFN_EVENT_KEYS/);
        } finally {
          served.kill("SIGKILL");
        }
      } finally {
        rmSync(project, { recursive: true, force: true });
      }
    },
  );

  it("finds the project as the source wherever out is: outside the project, or absolute", async () => {
    const elsewhere = mkdtempSync(join(tmpdir(), "crdfn-gcp-out-"));
    try {
      for (const out of [join(elsewhere, "deploy"), `../${basename(elsewhere)}/deploy`]) {
        const other = await generate([], { settings: "crdfn.deploy.yaml", out }, dir);
        writeGenerated(other);
        const gcpDir = join(other.outDir, "gcp");
        assert.ok(gcpDir.startsWith(elsewhere), `${out}: written outside the project`);
        const main = JSON.parse(readFileSync(join(gcpDir, "main.tf.json"), "utf8")) as typeof tf;
        const sourceDir = (main.variable.source_dir as Json).default as string;
        // Terraform runs in <out>/gcp (gcp/README.md) and resolves a relative source_dir from there.
        assert.equal(resolve(gcpDir, sourceDir), dir, `${out}: source_dir ${sourceDir} is the project`);
        assert.equal(isAbsolute(sourceDir), isAbsolute(out), `${out}: relative when out is, so the folders move together`);
      }
    } finally {
      rmSync(elsewhere, { recursive: true, force: true });
    }
  });

  it("per operator: an ordered push subscription to its own function, dead-lettering to its own topic after 5 deliveries, with backoff, authenticated as the push identity", () => {
    for (const [op, entry] of [
      ["greeting", "greeting"],
      ["crontab", "crontab-http"],
    ] as const) {
      const sub = res("google_pubsub_subscription")[`${op}_events`]!;
      assert.equal(sub.name, `crdfn-shop-${op}-events`);
      assert.equal(sub.topic, `\${google_pubsub_topic.${op}_events.id}`);
      assert.equal(sub.enable_message_ordering, true);
      assert.deepEqual(sub.dead_letter_policy, { dead_letter_topic: `\${google_pubsub_topic.${op}_dead_letters.id}`, max_delivery_attempts: 5 });
      assert.deepEqual(sub.retry_policy, { minimum_backoff: "5s", maximum_backoff: "600s" });
      assert.deepEqual(sub.expiration_policy, { ttl: "" }, "never expires for want of traffic");
      const uri = `\${google_cloudfunctions2_function.${op}.service_config[0].uri}`;
      assert.deepEqual(sub.push_config, { push_endpoint: uri, oidc_token: { service_account_email: "${google_service_account.push.email}", audience: uri } });
      const fn = res("google_cloudfunctions2_function")[op]!;
      assert.equal(fn.name, `crdfn-shop-${op}`);
      assert.equal((fn.build_config as Json).entry_point, entry);
      assert.equal((fn.service_config as Json).service_account_email, `\${google_service_account.${op}.email}`);
      assert.ok(Number(sub.ack_deadline_seconds) > Number((fn.service_config as Json).timeout_seconds), "push waits longer than the function may run");
      const dl = res("google_pubsub_subscription")[`${op}_dead_letters`]!;
      assert.equal(dl.topic, `\${google_pubsub_topic.${op}_dead_letters.id}`);
      assert.equal(dl.push_config, undefined, "the dead letters are pulled (crdfn dlq), not pushed");
    }
  });

  it("least privilege: each function publishes to its own topic only; only the push identity invokes; the bridge publishes to exactly the event topics", () => {
    const members = Object.values({
      ...res("google_pubsub_topic_iam_member"),
      ...res("google_pubsub_subscription_iam_member"),
      ...res("google_project_iam_member"),
      ...res("google_cloud_run_service_iam_member"),
      ...res("google_service_account_iam_member"),
    }) as Array<Json & { member: string; role: string }>;
    const grantsOf = (member: string) =>
      members
        .filter((m) => m.member === member)
        .map((m) => `${m.role} on ${String(m.topic ?? m.subscription ?? m.service ?? m.service_account_id ?? m.project)}`)
        .sort();
    for (const op of ["greeting", "crontab"]) {
      assert.deepEqual(grantsOf(`serviceAccount:\${google_service_account.${op}.email}`), [
        `roles/container.clusterViewer on ${project}`,
        `roles/pubsub.publisher on \${google_pubsub_topic.${op}_events.id}`,
      ]);
    }
    assert.deepEqual(grantsOf("serviceAccount:${google_service_account.push.email}"), [
      "roles/run.invoker on ${google_cloudfunctions2_function.crontab.name}",
      "roles/run.invoker on ${google_cloudfunctions2_function.greeting.name}",
    ]);
    const bridge = members.find((m) => m.member.startsWith("principal://"))!.member;
    assert.equal(
      bridge,
      `principal://iam.googleapis.com/projects/\${data.google_project.this.number}/locations/global/workloadIdentityPools/${project}.svc.id.goog/subject/ns/crdfn-system/sa/crdfn-bridge-shop`,
    );
    assert.deepEqual(
      grantsOf(bridge),
      ["crontab", "greeting"]
        .flatMap((op) => [
          `roles/pubsub.publisher on \${google_pubsub_topic.${op}_events.id}`,
          `roles/pubsub.viewer on \${google_pubsub_topic.${op}_events.id}`,
        ])
        .sort(),
    );
    const agent = "serviceAccount:service-${data.google_project.this.number}@gcp-sa-pubsub.iam.gserviceaccount.com";
    assert.deepEqual(
      grantsOf(agent),
      [
        "roles/iam.serviceAccountTokenCreator on ${google_service_account.push.name}",
        ...["crontab", "greeting"].flatMap((op) => [
          `roles/pubsub.publisher on \${google_pubsub_topic.${op}_dead_letters.id}`,
          `roles/pubsub.subscriber on \${google_pubsub_subscription.${op}_events.id}`,
        ]),
      ].sort(),
    );
    assert.ok(!members.some((m) => m.member === "allUsers" || m.member === "allAuthenticatedUsers"));
  });

  it("a function's settings are its subscription's, and parse as the function reads them", () => {
    for (const op of ["greeting", "crontab"]) {
      const env = (res("google_cloudfunctions2_function")[op]!.service_config as Json).environment_variables as Record<string, string>;
      assert.equal(env.CRDFN_PUBSUB_TOPIC, `\${google_pubsub_topic.${op}_events.id}`);
      const resolved = {
        ...env,
        CRDFN_PUBSUB_TOPIC: `projects/${project}/topics/crdfn-shop-${op}-events`,
        CRDFN_CLUSTERS: JSON.stringify(tf.locals.clusters)
          .replace("${data.google_container_cluster.gke.endpoint}", "34.1.2.3")
          .replace("${data.google_container_cluster.gke.master_auth[0].cluster_ca_certificate}", Buffer.from("pem").toString("base64")),
      };
      const push = loadPushSettings(resolved);
      const sub = res("google_pubsub_subscription")[`${op}_events`]!;
      assert.equal(push.CRDFN_MAX_DELIVERY_ATTEMPTS, (sub.dead_letter_policy as Json).max_delivery_attempts);
      assert.equal(`${push.CRDFN_RETRY_MIN_BACKOFF_SECONDS}s`, (sub.retry_policy as Json).minimum_backoff);
      assert.equal(`${push.CRDFN_RETRY_MAX_BACKOFF_SECONDS}s`, (sub.retry_policy as Json).maximum_backoff);
      const registry = loadClusterRegistry(loadConfig(resolved), () => "");
      assert.deepEqual([...registry.keys()], ["prod"], "the bridge's cluster name");
      assert.deepEqual(registry.get("prod"), { auth: "gke", server: "https://34.1.2.3", caData: Buffer.from("pem").toString("base64") });
      // Its operator's event keys: from a Secret Manager secret of its own, which only this function's own service account may read; never in the Terraform.
      const fn = res("google_cloudfunctions2_function")[op]!.service_config as Json;
      assert.deepEqual(fn.secret_environment_variables, [
        { key: "CRDFN_EVENT_KEYS", project_id: project, secret: `crdfn-shop-event-keys-${op}`, version: "latest" },
      ]);
      assert.deepEqual(res("google_secret_manager_secret_iam_member")[`${op}_event_keys`], {
        project,
        secret_id: `crdfn-shop-event-keys-${op}`,
        role: "roles/secretmanager.secretAccessor",
        member: `serviceAccount:\${google_service_account.${op}.email}`,
      });
      assert.deepEqual(
        [...loadEventKeyrings(`k1:${Buffer.alloc(32, 1).toString("base64")}`, registry, ["widgets.shop.example.com"]).keys()],
        ["prod"],
        "one key without a cluster part serves the one cluster",
      );
    }
    assert.ok(!JSON.stringify(tf).includes("google_secret_manager_secret_version"), "no secret value in the Terraform (nor its state)");
  });

  it("the bridge's settings name the same topics and load as the bridge reads them", () => {
    const cm = parse(g.files.get("bridge/configmap.yaml")!) as { data: { "bridge.yaml": string } };
    const config = loadBridgeConfig({}, parse(cm.data["bridge.yaml"]), "bridge.yaml");
    const topics = Object.values(res("google_pubsub_topic")).map((t) => `projects/${project}/topics/${String(t.name)}`);
    assert.deepEqual(config.resources.map((r) => r.topic).sort(), topics.filter((t) => t.endsWith("-events")).sort());
    assert.equal(config.queue.url, undefined);
    assert.equal(config.cluster, "prod");
  });

  it("log-based metrics read the fields of the line a function writes", () => {
    let line = "";
    cloudLoggingMetrics("prod", (l) => (line = l)).observe({
      controller: "greeting",
      outcome: { result: "success" },
      apiCalls: 3,
      seconds: 0.05,
      lagSeconds: 0.2,
    });
    const payload = JSON.parse(line) as Json;
    assert.equal(payload[METRIC_MARKER.field], METRIC_MARKER.value);
    assert.equal(payload.severity, "INFO");
    const metrics = res("google_logging_metric");
    assert.equal(Object.keys(metrics).length, LOG_COUNTERS.length + LOG_DISTRIBUTIONS.length);
    for (const m of Object.values(metrics)) {
      assert.match(String(m.name), /^crdfn-shop\//);
      assert.match(String(m.filter), /service_name=\("crdfn-shop-greeting" OR "crdfn-shop-crontab"\)/);
      for (const x of [...Object.values(m.label_extractors as Record<string, string>), ...(m.value_extractor ? [m.value_extractor as string] : [])]) {
        const field = /^EXTRACT\(jsonPayload\.([A-Za-z]+)\)$/.exec(x)?.[1];
        assert.ok(field && field in payload, `${x} reads a field of the line`);
      }
    }
  });

  describe("in a real API server", () => {
    let cluster: LocalCluster;
    const kubectl = (...args: string[]) => run(cluster.kubectl, ["--kubeconfig", cluster.kubeconfigPath, ...args], { encoding: "utf8" });
    const email = `crdfn-shop-greeting@${project}.iam.gserviceaccount.com`;
    before(async () => {
      cluster = await startCluster({ log: () => {}, queue: false });
      await kubectl("create", "namespace", "demo");
      await kubectl("apply", "--server-side", "-f", join(dir, "deploy", "crds"));
      await kubectl("apply", "--server-side", "-k", join(dir, "deploy", "functions"));
    });
    after(async () => cluster?.stop());

    it("the function's Google identity has its ServiceAccount's grants, in the served namespaces only", async () => {
      const can = async (...args: string[]) => (await kubectl("auth", "can-i", ...args, `--as=${email}`).catch((e: { stdout: string }) => e)).stdout.trim();
      // RBAC takes effect a moment after it is written.
      await eventually(async () => assert.equal(await can("create", "configmaps", "-n", "default"), "yes"), { timeoutMs: 30_000, intervalMs: 500 });
      assert.equal(await can("update", "greetings.example.com", "--subresource=status", "-n", "demo"), "yes");
      assert.equal(await can("create", "configmaps", "-n", "kube-system"), "no");
      assert.equal(await can("list", "configmaps", "-n", "default"), "no", "no list: the bridge watches");
      assert.equal(await can("create", "cronjobs.batch", "-n", "default"), "no", "another operator's kind");
    });

    it("the admission policy refuses the function's Google identity a child it does not control", async () => {
      const forged = join(dir, "forged.yaml");
      writeFileSync(forged, stringify({ apiVersion: "v1", kind: "ConfigMap", metadata: { name: "forged", namespace: "default" } }));
      const err = await eventually(
        async () => {
          const e = await kubectl("create", "--dry-run=server", "-f", forged, `--as=${email}`).then<undefined, { stderr: string }>(
            () => undefined,
            (x: { stderr: string }) => x,
          );
          assert.ok(e, "refused");
          assert.match(e.stderr, /crdfn-greeting-function-gke/);
          return e;
        },
        { timeoutMs: 30_000, intervalMs: 500 },
      );
      assert.match(err.stderr, /crdfn: the greeting function may write configmaps only with a controller owner reference to its Greeting/);
      const docs = parseAllDocuments(g.files.get("functions/greeting-gke.yaml")!).map((d) => d.toJSON() as { kind: string });
      // Its bindings to the function's Role in the two served namespaces, and both function policies (ownership; namespaces) for its Google identity.
      assert.deepEqual(docs.map((d) => d.kind).sort(), [
        "RoleBinding",
        "RoleBinding",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
        "ValidatingAdmissionPolicyBinding",
      ]);
    });
  });
});
