// serverless.yml, proven by what it generates: `serverless package` runs offline (placeholder
// AWS credentials, a dead proxy for any network attempt) and the CloudFormation it writes is
// checked for the queue, trigger, IAM and configuration guarantees crdfn depends on. The bundles
// are then unzipped and run.
import { execFile } from "node:child_process";
import { formatEventKey } from "../core/event-auth.ts";
import { signedForTest, testFunctionKeys, testOperatorKey } from "./support/event-key.ts";
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { parse } from "yaml";
import { packageRoot } from "../emulator/paths.ts";
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import cronTab from "../examples/crontab/operator.ts";
import greeting from "../examples/greeting/operator.ts";
import queueOperator from "../examples/queue/operator.ts";
import { loadConfig } from "../functions/runtime/config.ts";
import { PACKAGE_PARAMS, packageCheckout, unzip, type CfnResource } from "./support/serverless-package.ts";

const run = promisify(execFile);
const operators = [greeting, cronTab, queueOperator];

const PARAMS = PACKAGE_PARAMS;
/** Bundles bigger than this slow every cold start; today they are well under 1 MiB zipped. */
const MAX_ZIP_BYTES = 5 * 1024 * 1024;

type Json = Record<string, unknown>;
type Resource = CfnResource;
interface Statement {
  Effect: string;
  Action: string | string[];
  Resource: unknown;
}

describe("serverless package (offline)", { timeout: 300_000 }, () => {
  let dir: string;
  let resources: Record<string, Resource>;
  let output: string;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "crdfn-sls-"));
    const packaged = await packageCheckout(dir);
    output = packaged.output;
    console.log(`serverless package took ${packaged.ms} ms`);
    resources = packaged.resources;
  });

  after(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const ofType = (type: string) => Object.entries(resources).filter(([, r]) => r.Type === type);
  const getAttTarget = (v: unknown): string => {
    const att = (v as { "Fn::GetAtt"?: [string, string] } | undefined)?.["Fn::GetAtt"];
    assert.ok(att && att[1] === "Arn", `expected Fn::GetAtt <resource>.Arn, got ${JSON.stringify(v)}`);
    return att[0];
  };
  const queue = (logicalId: string): Json => {
    const r = resources[logicalId];
    assert.equal(r?.Type, "AWS::SQS::Queue", `${logicalId} is a queue`);
    return r.Properties;
  };
  /** The Lambda function of an operator, its queue trigger and the queue behind it. */
  const functionOf = (name: string) => {
    const entry = ofType("AWS::Lambda::Function").find(([, r]) => r.Properties.FunctionName === `crdfn-test-${name}`);
    assert.ok(entry, `a Lambda function crdfn-test-${name}`);
    const [logicalId, fn] = entry;
    const mappings = ofType("AWS::Lambda::EventSourceMapping")
      .map(([, r]) => r.Properties)
      .filter((p) => getAttTarget(p.FunctionName) === logicalId);
    const sources = mappings.map((m) => ({ mapping: m, queueId: getAttTarget(m.EventSourceArn) }));
    assert.equal(sources.length, 1, `${name}: one trigger`);
    assert.equal(queue(sources[0]!.queueId).FifoQueue, true, `${name}: its trigger is its FIFO queue`);
    return { fn: fn.Properties, fifo: sources[0]! };
  };
  const names = operators.map((op) => op.resource.kind.toLowerCase());

  it("packages with no AWS account and no network, with only the known runtime warning", () => {
    assert.match(output, /Service packaged/);
    // serverless 3.40's schema predates nodejs22.x; nothing else may be invalid.
    const invalid = [...output.matchAll(/at '([^']+)'/g)].map((m) => m[1]);
    assert.deepEqual(invalid, ["provider.runtime"]);
  });

  it("has one Lambda per operator on Node 22+, bundled by esbuild, small", () => {
    assert.deepEqual(ofType("AWS::Lambda::Function").length, operators.length);
    for (const name of names) {
      const { fn } = functionOf(name);
      assert.match(String(fn.Runtime), /^nodejs(22|24)\.x$/);
      assert.equal(fn.Handler, `examples/${name}/lambda.handler`);
      const zip = join(dir, `${name}.zip`);
      const size = statSync(zip).size;
      console.log(`${name}.zip: ${(size / 1024).toFixed(0)} KiB`);
      assert.ok(size < MAX_ZIP_BYTES, `${name}.zip is ${size} bytes`);
      assert.deepEqual(Object.keys(unzip(readFileSync(zip))), [`examples/${name}/lambda.mjs`]);
    }
  });

  it("triggers each function from its FIFO queue: batch ≤ 10, no batching window, partial batch responses", () => {
    for (const name of names) {
      for (const { mapping } of [functionOf(name).fifo]) {
        assert.ok(Number(mapping.BatchSize) >= 1 && Number(mapping.BatchSize) <= 10, `${name}: batch size ${String(mapping.BatchSize)}`);
        assert.equal(mapping.MaximumBatchingWindowInSeconds, undefined, `${name}: no batching window`);
        assert.deepEqual(mapping.FunctionResponseTypes, ["ReportBatchItemFailures"]);
        assert.equal(mapping.Enabled, true);
      }
    }
  });

  it("has no queue but the event queues and their dead-letter queues: no standard (requeue) queue", () => {
    const queues = ofType("AWS::SQS::Queue")
      .map(([, r]) => String(r.Properties.QueueName))
      .sort();
    assert.deepEqual(queues, names.flatMap((n) => [`crdfn-prod-${n}-dlq.fifo`, `crdfn-prod-${n}.fifo`]).sort());
  });

  it("gives every queue an encrypted dead-letter queue after 5 receives and a visibility timeout ≥ 6 × the function timeout", () => {
    for (const name of names) {
      const { fn, fifo } = functionOf(name);
      const timeout = Number(fn.Timeout);
      assert.ok(timeout > 0);
      for (const { queueId } of [fifo]) {
        const q = queue(queueId);
        assert.equal(q.SqsManagedSseEnabled, true, `${queueId} is encrypted`);
        assert.ok(Number(q.VisibilityTimeout) >= 6 * timeout, `${queueId}: visibility ${String(q.VisibilityTimeout)} s ≥ 6 × ${timeout} s`);
        const redrive = q.RedrivePolicy as { deadLetterTargetArn: unknown; maxReceiveCount: number };
        assert.equal(redrive.maxReceiveCount, 5, `${queueId} dead-letters after 5 receives`);
        const dlq = queue(getAttTarget(redrive.deadLetterTargetArn));
        assert.equal(dlq.SqsManagedSseEnabled, true, `${queueId}'s DLQ is encrypted`);
        // A FIFO queue's DLQ must be FIFO, a standard queue's standard.
        assert.equal(dlq.FifoQueue, q.FifoQueue);
      }
      const events = queue(fifo.queueId);
      assert.equal(events.FifoQueue, true);
      assert.match(String(events.QueueName), /\.fifo$/);
      // The bridge sets deduplication ids (uid + resourceVersion); content-based would merge distinct events.
      assert.equal(events.ContentBasedDeduplication, false);
    }
  });

  it("gives each function its own role, scoped to its own queues and log group, and to what its operator declares (no '*')", () => {
    assert.equal(resources.IamRoleLambdaExecution, undefined, "no shared default role");
    for (const name of names) {
      const { fn, fifo } = functionOf(name);
      const role = resources[getAttTarget(fn.Role)];
      assert.equal(role?.Type, "AWS::IAM::Role");
      const statements = (role.Properties.Policies as Array<{ PolicyDocument: { Statement: Statement[] } }>).flatMap((p) => p.PolicyDocument.Statement);
      assert.equal(role.Properties.ManagedPolicyArns, undefined, "no managed policies");
      const granted = new Map<string, Set<string>>();
      for (const s of statements) {
        assert.equal(s.Effect, "Allow");
        const targets = (Array.isArray(s.Resource) ? s.Resource : [s.Resource]).map((r) => {
          assert.notEqual(r, "*", `${name}: no wildcard resource`);
          const sub = (r as { "Fn::Sub"?: string })["Fn::Sub"];
          return sub ?? getAttTarget(r);
        });
        for (const action of [s.Action].flat()) {
          for (const t of targets) granted.set(action, (granted.get(action) ?? new Set()).add(t));
        }
      }
      const consumed = new Set([fifo.queueId]);
      // What its operator declares (cloud.aws: the Queue example's queues), on exactly what it names.
      const declared = operators.find((op) => op.resource.kind.toLowerCase() === name)?.cloud?.aws ?? [];
      const declaredOn = (action: string) => declared.filter((p) => p.actions.includes(action)).flatMap((p) => p.resources);
      assert.deepEqual(
        [...granted.keys()].sort(),
        [
          ...new Set([
            "logs:CreateLogStream",
            "logs:PutLogEvents",
            "secretsmanager:GetSecretValue",
            "sqs:ChangeMessageVisibility",
            "sqs:DeleteMessage",
            "sqs:GetQueueAttributes",
            "sqs:GetQueueUrl",
            "sqs:ReceiveMessage",
            "sqs:SendMessage",
            ...declared.flatMap((p) => p.actions),
          ]),
        ].sort(),
      );
      // ChangeMessageVisibility: the adapters lengthen a retried message's visibility, on its own queues only.
      for (const action of ["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes", "sqs:ChangeMessageVisibility", "sqs:GetQueueUrl"])
        assert.deepEqual(granted.get(action), new Set([...consumed, ...declaredOn(action)]), `${name}: ${action}`);
      // It sends only to its own queue: a message deferred during an API server outage goes back into its object's group.
      assert.deepEqual(granted.get("sqs:SendMessage"), consumed);
      for (const p of declared)
        for (const action of p.actions.filter((a) => !a.startsWith("sqs:Get")))
          assert.deepEqual(granted.get(action), new Set(declaredOn(action)), `${name}: ${action}`);
      // Its own operator's key secret, and no other (Secrets Manager's 6 random characters end the ARN).
      assert.deepEqual(
        [...(granted.get("secretsmanager:GetSecretValue") ?? [])],
        [`arn:\${AWS::Partition}:secretsmanager:\${AWS::Region}:\${AWS::AccountId}:secret:crdfn/test/event-keys/${name}-??????`],
      );
      for (const action of ["logs:CreateLogStream", "logs:PutLogEvents"]) {
        assert.deepEqual(
          [...(granted.get(action) ?? [])],
          [`arn:\${AWS::Partition}:logs:\${AWS::Region}:\${AWS::AccountId}:log-group:/aws/lambda/crdfn-test-${name}:*`],
        );
      }
    }
  });

  it("names in the generated functions/README.md the ARN of the role each function has (account and region from the settings)", () => {
    const readme = readFileSync(join(packageRoot, "infra", "generated", "functions", "README.md"), "utf8");
    const written = [...readme.matchAll(/--principal-arn (\S+)/g)].map((m) => m[1]!.replace("<stage>", "test"));
    const account = /\/(\d{12})$/.exec(
      (parse(readFileSync(join(packageRoot, "crdfn.deploy.yaml"), "utf8")) as { queues: { urlBase: string } }).queues.urlBase,
    )![1];
    const roles = names.map((name) => `arn:aws:iam::${account}:role/${resources[getAttTarget(functionOf(name).fn.Role)]!.Properties.RoleName as string}`);
    assert.deepEqual(written, roles);
  });

  it("wires the cluster endpoint, credential source and cluster id into exactly the settings the runtime reads", () => {
    for (const name of names) {
      const { fn } = functionOf(name);
      const vars = (fn.Environment as { Variables: Record<string, unknown> }).Variables;
      assert.deepEqual(Object.keys(vars).sort(), [
        "CRDFN_CLUSTER",
        "CRDFN_EKS_CLUSTER",
        "CRDFN_EVENT_KEYS_SECRET",
        "CRDFN_EVENT_KEYS_SECRET_STAGE",
        "CRDFN_KUBE_AUTH",
        "CRDFN_KUBE_CA_DATA",
        "CRDFN_KUBE_SERVER",
        "LOG_LEVEL",
      ]);
      // No key, nor a reference CloudFormation would resolve into one: the function fetches its own operator's secret, at the label the deploy names.
      assert.equal(vars.CRDFN_EVENT_KEYS_SECRET, `crdfn/test/event-keys/${name}`);
      assert.equal(vars.CRDFN_EVENT_KEYS_SECRET_STAGE, PARAMS.eventKeysLabel);
      assert.doesNotMatch(JSON.stringify(vars), /resolve:secretsmanager/);
      // What Lambda would hand the process: AWS_REGION set by Lambda.
      const config = loadConfig({ ...(vars as NodeJS.ProcessEnv), AWS_REGION: "us-east-1" });
      assert.equal(config.CRDFN_KUBE_AUTH, "eks");
      assert.equal(config.CRDFN_KUBE_SERVER, PARAMS.kubeServer);
      assert.equal(config.CRDFN_KUBE_CA_DATA, PARAMS.kubeCaData);
      assert.equal(config.CRDFN_EKS_CLUSTER, PARAMS.eksCluster);
      assert.equal(config.CRDFN_CLUSTER, "production");
    }
  });

  it("gives the bridge a role EKS Pod Identity hands its ServiceAccount, allowed to send to exactly the event queues", () => {
    const role = resources.BridgeRole;
    assert.equal(role?.Type, "AWS::IAM::Role");
    assert.deepEqual((role.Properties.AssumeRolePolicyDocument as { Statement: unknown[] }).Statement, [
      { Effect: "Allow", Principal: { Service: "pods.eks.amazonaws.com" }, Action: ["sts:AssumeRole", "sts:TagSession"] },
    ]);
    assert.equal(role.Properties.ManagedPolicyArns, undefined, "no managed policies");
    const statements = (role.Properties.Policies as Array<{ PolicyDocument: { Statement: Statement[] } }>).flatMap((p) => p.PolicyDocument.Statement);
    assert.equal(statements.length, 1);
    assert.deepEqual(statements[0]!.Action, ["sqs:SendMessage", "sqs:GetQueueAttributes"]);
    const targets = (statements[0]!.Resource as unknown[]).map(getAttTarget).sort();
    assert.deepEqual(targets, names.map((n) => functionOf(n).fifo.queueId).sort());
    const [association, ...more] = ofType("AWS::EKS::PodIdentityAssociation");
    assert.equal(more.length, 0);
    assert.deepEqual(association![1].Properties, {
      ClusterName: PARAMS.eksCluster,
      Namespace: "crdfn-system",
      ServiceAccount: "crdfn-bridge-examples",
      RoleArn: { "Fn::GetAtt": ["BridgeRole", "Arn"] },
    });
  });

  it("bundles a handler that runs: a malformed message is reported as the batch's only failure", async () => {
    for (const name of names) {
      const work = mkdtempSync(join(tmpdir(), `crdfn-bundle-${name}-`));
      try {
        const files = unzip(readFileSync(join(dir, `${name}.zip`)));
        const bundle = join(work, "lambda.mjs");
        writeFileSync(bundle, files[`examples/${name}/lambda.mjs`] ?? "");
        const event = {
          Records: [
            {
              messageId: "m-1",
              receiptHandle: "r",
              body: "{not json",
              attributes: { ApproximateReceiveCount: "1", MessageGroupId: "g" },
              messageAttributes: {},
              md5OfBody: "",
              eventSource: "aws:sqs",
              eventSourceARN: `arn:aws:sqs:us-east-1:123456789012:crdfn-test-${name}.fifo`,
              awsRegion: "us-east-1",
            },
          ],
        };
        const script = `const { handler } = await import(${JSON.stringify(bundle)});
          const out = await handler(${JSON.stringify(event)}, { getRemainingTimeInMillis: () => 30000 });
          process.stdout.write(JSON.stringify(out));`;
        // An unreachable API server: a malformed message must fail without touching it.
        const { stdout } = await run(process.execPath, ["--input-type=module", "-e", script], {
          cwd: work,
          timeout: 30_000,
          env: {
            PATH: process.env.PATH ?? "",
            CRDFN_KUBE_AUTH: "token",
            CRDFN_KUBE_SERVER: "https://127.0.0.1:9",
            CRDFN_KUBE_TOKEN: "unused",
            CRDFN_EVENT_KEYS: testFunctionKeys(...operators.map((o) => o.resource)),
            LOG_LEVEL: "silent",
            AWS_REGION: "us-east-1",
          },
        });
        assert.deepEqual(JSON.parse(stdout), { batchItemFailures: [{ itemIdentifier: "m-1" }] });
      } finally {
        rmSync(work, { recursive: true, force: true });
      }
    }
  });

  it("leaves client-node out of the bundle: a kubeconfig cluster entry fails its event with one line naming why", async () => {
    const name = names[0] ?? "";
    const work = mkdtempSync(join(tmpdir(), `crdfn-bundle-kc-`));
    try {
      const bundle = join(work, "lambda.mjs");
      writeFileSync(bundle, unzip(readFileSync(join(dir, `${name}.zip`)))[`examples/${name}/lambda.mjs`] ?? "");
      assert.doesNotMatch(readFileSync(bundle, "utf8"), /undici|openid-client|oauth4webapi/, "client-node and its HTTP stack are not bundled");
      const body = JSON.stringify(
        signedForTest({
          v: 1,
          cluster: "dev",
          group: "example.com",
          version: "v1",
          plural: "greetings",
          kind: "Greeting",
          namespace: "default",
          name: "g",
          uid: "u",
          resourceVersion: "1",
          generation: 1,
          type: "ADDED",
          observedAt: new Date().toISOString(),
        }),
      );
      const record = {
        messageId: "m-1",
        receiptHandle: "r",
        body,
        attributes: { ApproximateReceiveCount: "1", MessageGroupId: "g" },
        messageAttributes: {},
        md5OfBody: "",
        eventSource: "aws:sqs",
        eventSourceARN: "arn:aws:sqs:us-east-1:123456789012:q.fifo",
        awsRegion: "us-east-1",
      };
      const script = `const { handler } = await import(${JSON.stringify(bundle)});
        const out = await handler(${JSON.stringify({ Records: [record] })}, { getRemainingTimeInMillis: () => 30000 });
        process.stdout.write("RESULT " + JSON.stringify(out) + "\\n");`;
      const { stdout } = await run(process.execPath, ["--input-type=module", "-e", script], {
        cwd: work,
        timeout: 30_000,
        env: {
          PATH: process.env.PATH ?? "",
          CRDFN_CLUSTERS: JSON.stringify({ dev: { auth: "kubeconfig" } }),
          CRDFN_EVENT_KEYS: `dev/${formatEventKey(testOperatorKey(greeting.resource))}`,
          LOG_LEVEL: "error",
          AWS_REGION: "us-east-1",
        },
      });
      const result = stdout.split("\n").find((l) => l.startsWith("RESULT ")) ?? "";
      assert.deepEqual(JSON.parse(result.slice("RESULT ".length)), { batchItemFailures: [{ itemIdentifier: "m-1" }] });
      assert.match(stdout, /cannot set up the client of cluster \\"dev\\": a kubeconfig cluster entry cannot be used in crdfn's Lambda bundle/);
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  });
});
