// The zip `serverless package` writes, run as Lambda runs it: unzipped unchanged into a task
// root, started by the real Lambda runtime (the Runtime Interface Emulator with the Node.js
// runtime interface client as its bootstrap, emulator/local-lambda.ts) with the handler string
// and the environment of the generated CloudFormation, and invoked with an SQS FIFO batch shaped
// as the event source mapping sends it. What the adapter tests prove in-process (partial batch
// responses, the settle policy) is proven here through the runtime's own handler loading and
// Runtime API: an ESM bundle, its handler export, the answer serialized back to the invoker.
// An earlier incarnation's event, re-sent to the packaged zip after a delete and re-create, is
// handled (not failed) and writes nothing to the live object's child.
// Both the checkout's example and a project `crdfn init` made, packaged as its user packages it;
// the latter's event is the one the bridge itself published and signed, not one signed here.
// Traced (OTEL_EXPORTER_OTLP_ENDPOINT), the zip's spans reach a real OTLP receiver before the
// invocation returns: Lambda freezes the process once it has.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, dirname, join } from "node:path";
import { DeleteMessageCommand, SendMessageCommand, type Message } from "@aws-sdk/client-sqs";
import { CreateSecretCommand, PutSecretValueCommand, SecretsManagerClient } from "@aws-sdk/client-secrets-manager";
import type { KeyEvent } from "../core/event.ts";
import type { Operator } from "../core/operator.ts";
import greeting, { configMapName } from "../examples/greeting/operator.ts";
import { localLambdaRuntime, startLocalLambda, type LocalLambda } from "../emulator/local-lambda.ts";
import { testOperatorKey } from "./support/event-key.ts";
import { formatEventKey } from "../core/event-auth.ts";
import { applyDevIdentities, type DevIdentities } from "../cli/local/dev-identities.ts";
import {
  announcedEvent,
  CLUSTER,
  crApi,
  type Cr,
  lambdaEvent,
  publish,
  ready,
  receiveAll,
  startEnv,
  startTestBridge,
  waitFor,
  type Env,
} from "./support/functions-environment.ts";
import { packageCheckout, serverlessPackage, unzip, type CfnResource } from "./support/serverless-package.ts";
import { makeProject, type Project } from "./support/projects.ts";
import { startMoto, type Moto } from "./support/moto.ts";
import { startOtlpReceiver } from "./support/otlp-receiver.ts";
import { projectFiles, projectNames } from "../cli/generate/init-templates.ts";
import { packageRoot } from "../emulator/paths.ts";
import type { RunningBridge } from "../bridge/bridge.ts";

const op = greeting as Operator<unknown>;
const UNSERVED = "unserved";

describe("the packaged Lambda in the real Lambda runtime (RIE + aws-lambda-ric)", { timeout: 900_000 }, () => {
  let env: Env;
  let work: string;
  let fn: { handler: string; variables: Record<string, string>; timeout: number; memory: number; zip: string; name: string };
  let lambda: LocalLambda | undefined;
  let identities: DevIdentities | undefined;
  let refused: Cr;
  /** The unzipped task root and the function's environment, as the first test started it. */
  let deployed: { root: string; environment: Record<string, string> } | undefined;

  before(async () => {
    // First run only: builds RIE (Go) and installs aws-lambda-ric (its native part compiles), minutes.
    await localLambdaRuntime({ env: process.env, log: (line) => console.error(`# ${line}`) });
    work = mkdtempSync(join(tmpdir(), "crdfn-lambda-runtime-"));
    const starting = startEnv([op], { file: import.meta.filename, namespaces: [UNSERVED], identities: false });
    try {
      await packageGreeting();
    } finally {
      // Assigned however packaging ended, so that after() stops it.
      env = await starting;
    }
    // An object left in a namespace that is no longer served (created before the identities that
    // now refuse it): its reconcile fails, as the function may neither apply its child nor write
    // its status or an Event there, so nothing can record the failure on it.
    refused = await crApi(env, op, env.cluster.ns(UNSERVED)).create("refused", { message: "never written" });
    identities = await applyDevIdentities({ kubeConfig: env.cluster.kubeConfig, operators: [op], namespaces: [env.cluster.namespace], project: "test" });
  });

  /** `serverless package` into work/package; Greeting's function as its template declares it. */
  async function packageGreeting(): Promise<void> {
    const dir = join(work, "package");
    const { resources } = await packageCheckout(dir);
    const [, declared] =
      Object.entries(resources).find(
        ([, r]: [string, CfnResource]) => r.Type === "AWS::Lambda::Function" && r.Properties.FunctionName === "crdfn-test-greeting",
      ) ?? [];
    assert.ok(declared, "the template declares crdfn-test-greeting");
    const p = declared.Properties as {
      Handler: string;
      Timeout: number;
      MemorySize: number;
      FunctionName: string;
      Environment: { Variables: Record<string, string> };
      Code: { S3Key: string };
    };
    fn = {
      handler: p.Handler,
      variables: p.Environment.Variables,
      timeout: p.Timeout,
      memory: p.MemorySize,
      zip: join(dir, basename(p.Code.S3Key)),
      name: p.FunctionName,
    };
  }

  after(async () => {
    await lambda?.stop();
    await stopMoto();
    identities?.stop();
    await env?.cluster.stop();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it("reconciles the good record and answers a partial batch response naming exactly the refused and the malformed one", async () => {
    const crs = crApi(env, op);
    const unserved = crApi(env, op, env.cluster.ns(UNSERVED));
    const good = await crs.create("good", { message: "from the Lambda runtime" });
    await publish(env, await announcedEvent(env, op, good));
    await publish(env, await announcedEvent(env, op, refused));
    const { fifo } = env.cluster.sqs.queues;
    await env.sqs.send(new SendMessageCommand({ QueueUrl: fifo, MessageBody: "{not json", MessageGroupId: "malformed", MessageDeduplicationId: "malformed" }));
    let batch: Message[] = [];
    await waitFor("a batch of all three", async () => {
      batch = [...batch, ...(await receiveAll(env, fifo, 120))];
      return batch.length >= 3;
    });
    const idOf = (part: string) => batch.find((m) => m.Body?.includes(part))?.MessageId ?? "?";
    const [goodId, refusedId, malformedId] = [idOf('"name":"good"'), idOf('"name":"refused"'), idOf("{not json")];

    // The zip unchanged, and what CloudFormation would hand the function, but where it points at
    // AWS: the embedded cluster with the function's own identity, its key secret in moto's
    // Secrets Manager (the test's operator key under the template's staging label), ElasticMQ for
    // the settle calls.
    const root = join(work, "task");
    for (const [name, data] of Object.entries(unzip(readFileSync(fn.zip)))) {
      mkdirSync(dirname(join(root, name)), { recursive: true });
      writeFileSync(join(root, name), data);
    }
    const { sqs } = env.cluster;
    const environment = {
      ...fn.variables,
      CRDFN_CLUSTER: CLUSTER,
      ...identities!.functionEnv(op),
      ...(await keySecretAsDeployed(fn.variables, op, sqs)),
      AWS_ENDPOINT_URL_SQS: sqs.endpoint,
      AWS_ACCESS_KEY_ID: sqs.accessKeyId,
      AWS_SECRET_ACCESS_KEY: sqs.secretAccessKey,
    };
    assert.deepEqual(
      Object.keys(fn.variables).filter((k) => !(k in environment)),
      [],
      "every variable of the template is set",
    );
    deployed = { root, environment };
    lambda = await startLocalLambda({
      taskRoot: root,
      handler: fn.handler,
      environment,
      functionName: fn.name,
      timeoutSeconds: fn.timeout,
      memoryMiB: fn.memory,
      region: sqs.region,
    });
    const response = await lambda.invoke(lambdaEvent(batch, fifo));
    assert.equal(response.status, 200, lambda.logTail());
    const failed = (response.body as { batchItemFailures: Array<{ itemIdentifier: string }> }).batchItemFailures.map((f) => f.itemIdentifier).sort();
    assert.deepEqual(failed, [refusedId, malformedId].sort(), lambda.logTail());
    // Failed for the reason meant: its failure could not be recorded on it (Lambda's log stream, the function's JSON lines).
    const lines = readFileSync(lambda.logFile, "utf8")
      .split("\n")
      .filter((l) => l.startsWith("{"))
      .map((l) => JSON.parse(l) as { messageId?: string; outcome?: string; detail?: string });
    assert.match(lines.find((l) => l.messageId === refusedId && l.outcome)?.detail ?? "", /^the status write was refused \(403 /);

    // The world: one object reconciled, its child written; the refused one untouched.
    const cr = await crs.get("good");
    assert.equal(ready(cr)?.status, "True");
    assert.equal(cr?.status?.observedGeneration, 1);
    const cm = await env.core.readNamespacedConfigMap({ name: configMapName("good"), namespace: env.cluster.namespace });
    assert.deepEqual(cm.data, { message: "from the Lambda runtime" });
    assert.equal((await unserved.get("refused"))?.status, undefined, "the refused object has no status");
    const refusedChildren = await env.core.listNamespacedConfigMap({ namespace: env.cluster.ns(UNSERVED) });
    assert.deepEqual(
      refusedChildren.items.map((c) => c.metadata?.name).filter((n) => n === configMapName("refused")),
      [],
    );

    // Nothing lost: Lambda's event source deletes what was not reported failed, and the two
    // failed records come back to be retried (and dead-lettered after the queue's receives).
    await env.sqs.send(new DeleteMessageCommand({ QueueUrl: fifo, ReceiptHandle: batch.find((m) => m.MessageId === goodId)?.ReceiptHandle }));
    const back = new Map<string, string | undefined>();
    await waitFor(
      "the failed records back on the queue",
      async () => {
        for (const m of await receiveAll(env, fifo, 120)) back.set(m.MessageId ?? "", m.ReceiptHandle);
        return back.size >= 2;
      },
      60_000,
    );
    assert.deepEqual([...back.keys()].sort(), [refusedId, malformedId].sort());
    // Gone, so that the next test's batches hold only its own messages.
    for (const handle of back.values()) await env.sqs.send(new DeleteMessageCommand({ QueueUrl: fifo, ReceiptHandle: handle }));
  });

  it("an earlier incarnation's validly signed event, re-sent after a delete and re-create, changes nothing of the live object's child", async () => {
    assert.ok(lambda, "the function runs in the Lambda runtime (started above)");
    const crs = crApi(env, op);
    const { fifo } = env.cluster.sqs.queues;
    /** Publishes the event as the bridge signs it and hands its message to the function as Lambda's event source does. */
    const delivered = async (event: KeyEvent, cause: string): Promise<Array<{ itemIdentifier: string }>> => {
      await publish(env, event, cause);
      let batch: Message[] = [];
      await waitFor(`the ${cause} message`, async () => (batch = [...batch, ...(await receiveAll(env, fifo, 120))]).length >= 1);
      const response = await lambda!.invoke(lambdaEvent(batch, fifo));
      assert.equal(response.status, 200, lambda!.logTail());
      for (const m of batch) await env.sqs.send(new DeleteMessageCommand({ QueueUrl: fifo, ReceiptHandle: m.ReceiptHandle }));
      return (response.body as { batchItemFailures: Array<{ itemIdentifier: string }> }).batchItemFailures;
    };
    const childOf = () => env.core.readNamespacedConfigMap({ name: configMapName("reborn"), namespace: env.cluster.namespace });

    const first = await crs.create("reborn", { message: "the first incarnation" });
    const kept = await announcedEvent(env, op, first);
    assert.deepEqual(await delivered(kept, "first"), []);
    assert.deepEqual((await childOf()).data, { message: "the first incarnation" });
    await crs.delete("reborn");
    await waitFor("reborn gone", async () => (await crs.get("reborn")) === undefined);
    const second = await crs.create("reborn", { message: "the live one" });
    assert.deepEqual(await delivered(await announcedEvent(env, op, second), "second"), []);
    const live = await childOf();
    assert.deepEqual(live.data, { message: "the live one" });
    assert.equal(live.metadata?.ownerReferences?.[0]?.uid, second.metadata?.uid);

    // The kept event is validly signed and names the deleted uid: handled (no batch item failure,
    // so not a dead letter), and the live child is exactly as it was.
    assert.deepEqual(await delivered(kept, "resent"), []);
    const after = await childOf();
    assert.equal(after.metadata?.resourceVersion, live.metadata?.resourceVersion, "no write of the live child");
    assert.equal(after.metadata?.ownerReferences?.[0]?.uid, second.metadata?.uid);
    const lines = readFileSync(lambda.logFile, "utf8")
      .split("\n")
      .filter((l) => l.startsWith("{"))
      .map((l) => JSON.parse(l) as { msg?: string; object?: string });
    assert.ok(
      lines.some((l) => l.msg?.startsWith("event of an earlier incarnation") && l.object === `${env.cluster.namespace}/reborn`),
      lambda.logTail(),
    );
    const cr = await crs.get("reborn");
    assert.equal(cr?.metadata?.uid, second.metadata?.uid);
    assert.equal(ready(cr)?.status, "True");
  });

  it("traced, exports its spans to the collector before the invocation returns: its handling, in the change's trace, and its API requests", async () => {
    assert.ok(deployed, "the zip unpacked and its environment made (above)");
    const receiver = await startOtlpReceiver();
    let traced: LocalLambda | undefined;
    try {
      const crs = crApi(env, op);
      const { fifo } = env.cluster.sqs.queues;
      const cr = await crs.create("traced", { message: "traced" });
      // As the bridge carries a change's context (core/event.ts traceparent, under the MAC).
      const traceId = "5bf92f3577b34da6a3ce929d0e0e4736";
      await publish(env, { ...(await announcedEvent(env, op, cr)), traceparent: `00-${traceId}-00f067aa0ba902b7-01` });
      let batch: Message[] = [];
      await waitFor("the message for traced", async () => (batch = [...batch, ...(await receiveAll(env, fifo, 120))]).length >= 1);
      traced = await startLocalLambda({
        taskRoot: deployed.root,
        handler: fn.handler,
        environment: { ...deployed.environment, OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint },
        functionName: fn.name,
        timeoutSeconds: fn.timeout,
        memoryMiB: fn.memory,
        region: env.cluster.sqs.region,
      });
      const invoked = performance.now();
      const response = await traced.invoke(lambdaEvent(batch, fifo));
      const invokeMs = performance.now() - invoked;
      // What the receiver holds now, not later: only a flush before the return puts it there.
      const spans = [...receiver.spans];
      assert.equal(response.status, 200, traced.logTail());
      assert.deepEqual((response.body as { batchItemFailures: unknown[] }).batchItemFailures, [], traced.logTail());
      const names = spans.map((s) => s.name).join(", ");
      const handle = spans.find((s) => s.name === "function handle");
      assert.ok(handle, `function handle among: ${names}`);
      assert.equal(handle.traceId, traceId);
      assert.equal(handle.parentSpanId, "00f067aa0ba902b7");
      assert.equal(handle.service, "crdfn-greeting");
      assert.equal(handle.attributes["crdfn.outcome"], "success");
      assert.equal(handle.attributes["crdfn.object"], `${CLUSTER}/${op.resource.group}/${op.resource.plural}/${env.cluster.namespace}/traced`);
      const inTrace = spans.filter((s) => s.traceId === traceId);
      const kube = inTrace.filter((s) => s.name.startsWith("kube "));
      assert.ok(kube.length > 0, `a kube span among: ${names}`);
      assert.ok(
        kube.some((s) => s.name === "kube PUT greetings" && s.attributes["http.response.status_code"] === 200),
        `the status write among: ${names}`,
      );
      const byId = new Map(inTrace.map((s) => [s.spanId, s]));
      for (const s of kube) assert.ok(byId.has(s.parentSpanId), `${s.name} is under a span of the trace`);
      assert.equal(inTrace.find((s) => s.name === "queue wait")?.attributes["messaging.system"], "aws_sqs");
      assert.equal(inTrace.find((s) => s.name === "function settle")?.attributes["crdfn.settlement"], "delete");
      console.error(`# traced invocation: ${invokeMs.toFixed(0)} ms, ${spans.length} spans in ${receiver.requests} export request(s): ${names}`);
      for (const m of batch) await env.sqs.send(new DeleteMessageCommand({ QueueUrl: fifo, ReceiptHandle: m.ReceiptHandle }));
    } finally {
      await traced?.stop();
      await receiver.close();
    }
  });
});

describe("a `crdfn init` project's packaged Lambda in the real Lambda runtime, on an event the bridge signed", { timeout: 900_000 }, () => {
  let env: Env;
  let work: string;
  let project: Project | undefined;
  let motd: Operator<unknown>;
  let fn: PackagedFunction;
  let bridge: RunningBridge | undefined;
  let lambda: LocalLambda | undefined;

  before(async () => {
    await localLambdaRuntime({ env: process.env, log: (line) => console.error(`# ${line}`) });
    work = mkdtempSync(join(tmpdir(), "crdfn-lambda-runtime-init-"));
    project = await initProject();
    // The project's own operator module, as its zip bundles it (its "crdfn" is this checkout).
    motd = ((await import(join(project.dir, "operator.ts"))) as { default: Operator<unknown> }).default;
    const out = join(work, "package");
    await serverlessPackage({ cwd: project.dir, out, stage: "prod", region: "eu-west-1", timeoutMs: 280_000 });
    fn = packagedFunction(out, (p) => p.FunctionName === "motd-prod-motd");
    env = await startEnv([motd], { file: join(dirname(import.meta.filename), "lambda-runtime-init.test.ts") });
  });

  after(async () => {
    await lambda?.stop();
    await stopMoto();
    await bridge?.stop(0);
    await env?.cluster.stop();
    project?.remove();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it("reconciles a Motd from the bridge's own message: the zip `serverless package` wrote, its handler and environment", async () => {
    const { fifo } = env.cluster.sqs.queues;
    // The bridge as deployed signs with its operator's key, derived from the cluster key it holds.
    bridge = await startTestBridge(env, `${motd.resource.group}/${motd.resource.version}/${motd.resource.plural}>v1/configmaps`);
    const crs = crApi(env, motd);
    await crs.create("welcome", { lines: ["Welcome to the cluster.", "Backups run at 02:00 UTC."] });
    let batch: Message[] = [];
    await waitFor("the bridge's message for welcome", async () => {
      batch = [...batch, ...(await receiveAll(env, fifo, 120))];
      return batch.some((m) => m.Body?.includes('"name":"welcome"'));
    });
    const root = join(work, "task");
    for (const [name, data] of Object.entries(unzip(readFileSync(fn.zip)))) {
      mkdirSync(dirname(join(root, name)), { recursive: true });
      writeFileSync(join(root, name), data);
    }
    const { sqs } = env.cluster;
    const environment = {
      ...fn.variables,
      CRDFN_CLUSTER: CLUSTER,
      ...env.identities!.functionEnv(motd),
      ...(await keySecretAsDeployed(fn.variables, motd, sqs)),
      AWS_ENDPOINT_URL_SQS: sqs.endpoint,
      AWS_ACCESS_KEY_ID: sqs.accessKeyId,
      AWS_SECRET_ACCESS_KEY: sqs.secretAccessKey,
    };
    assert.deepEqual(
      Object.keys(fn.variables).filter((k) => !(k in environment)),
      [],
      "every variable of the template is set",
    );
    lambda = await startLocalLambda({
      taskRoot: root,
      handler: fn.handler,
      environment,
      functionName: fn.name,
      timeoutSeconds: fn.timeout,
      memoryMiB: fn.memory,
      region: sqs.region,
    });
    const response = await lambda.invoke(lambdaEvent(batch, fifo));
    assert.equal(response.status, 200, lambda.logTail());
    assert.deepEqual((response.body as { batchItemFailures: unknown[] }).batchItemFailures, [], lambda.logTail());
    const cr = await crs.get("welcome");
    assert.equal(ready(cr)?.status, "True", lambda.logTail());
    assert.equal((cr?.status as { lines?: number } | undefined)?.lines, 2);
    const cm = await env.core.readNamespacedConfigMap({ name: "welcome-motd", namespace: env.cluster.namespace });
    assert.deepEqual(cm.data, { text: "Welcome to the cluster.\nBackups run at 02:00 UTC." });
  });
});

interface PackagedFunction {
  handler: string;
  variables: Record<string, string>;
  timeout: number;
  memory: number;
  zip: string;
  name: string;
}

/** The function of the template `serverless package` wrote into `out` that `which` picks, and its zip. */
function packagedFunction(out: string, which: (p: { FunctionName?: unknown }) => boolean): PackagedFunction {
  const { Resources } = JSON.parse(readFileSync(join(out, "cloudformation-template-update-stack.json"), "utf8")) as { Resources: Record<string, CfnResource> };
  const declared = Object.values(Resources).find((r) => r.Type === "AWS::Lambda::Function" && which(r.Properties));
  assert.ok(declared, "the template declares the function");
  const p = declared.Properties as {
    Handler: string;
    Timeout: number;
    MemorySize: number;
    FunctionName: string;
    Environment: { Variables: Record<string, string> };
    Code: { S3Key: string };
  };
  return {
    handler: p.Handler,
    variables: p.Environment.Variables,
    timeout: p.Timeout,
    memory: p.MemorySize,
    zip: join(out, basename(p.Code.S3Key)),
    name: p.FunctionName,
  };
}

/**
 * `crdfn init motd` as files, what it leaves blank filled in, crdfn this checkout (its sources:
 * the crdfn-source condition, and the esbuild plugin beside them rather than dist/), generated.
 */
async function initProject(): Promise<Project> {
  const files = Object.fromEntries(
    projectFiles(projectNames("motd"), {
      crdfn: "0.1.0",
      zod: "^4",
      typescript: "^6",
      typesNode: "^24",
      serverless: "3.40.0",
      serverlessEsbuild: "^1",
      functionsFramework: "^5",
    }),
  );
  files["crdfn.deploy.yaml"] = files["crdfn.deploy.yaml"]!.replace(/^cluster:( +#)/m, "cluster: motd-prod$1")
    .replace(/^ {2}image:( +#)/m, "  image: registry.example.com/motd/crdfn-bridge:0.1.0$1")
    .replace(/^ {2}urlBase:( +#)/m, "  urlBase: https://sqs.eu-west-1.amazonaws.com/123456789012$1");
  files["serverless.yml"] = files["serverless.yml"]!.replace(
    "plugins: ./node_modules/crdfn/dist/cli/esbuild-plugins.js",
    "plugins: ./node_modules/crdfn/cli/esbuild-plugins.ts\n    conditions: [crdfn-source]",
  );
  assert.match(files["serverless.yml"], /conditions: \[crdfn-source\]/, "the scaffold's esbuild plugin line");
  const project = makeProject("lambda-runtime-motd", files);
  mkdirSync(join(project.dir, "node_modules"));
  symlinkSync(packageRoot, join(project.dir, "node_modules", "crdfn"), "dir");
  await project.generate();
  return project;
}

let moto: Promise<Moto> | undefined;
const stopMoto = async () => {
  const running = moto;
  moto = undefined;
  await (await running?.catch(() => undefined))?.stop();
};

/**
 * The operator's key secret the template names (CRDFN_EVENT_KEYS_SECRET, read at the staging
 * label CRDFN_EVENT_KEYS_SECRET_STAGE), made in moto's Secrets Manager holding the test's key of
 * that operator; the function's variables that point it there.
 */
async function keySecretAsDeployed(
  variables: Record<string, string>,
  op: Operator<unknown>,
  aws: { region: string; accessKeyId: string; secretAccessKey: string },
): Promise<Record<string, string>> {
  const { CRDFN_EVENT_KEYS_SECRET: name, CRDFN_EVENT_KEYS_SECRET_STAGE: stage } = variables;
  assert.ok(name && stage, `the template gives the function its key secret's name and staging label: ${JSON.stringify(variables)}`);
  const { endpoint } = await (moto ??= startMoto(process.env, (line) => console.error(`# ${line}`)));
  const sm = new SecretsManagerClient({ region: aws.region, endpoint, credentials: { accessKeyId: aws.accessKeyId, secretAccessKey: aws.secretAccessKey } });
  try {
    await sm.send(new CreateSecretCommand({ Name: name, SecretString: "not-the-deployed-version" }));
    await sm.send(new PutSecretValueCommand({ SecretId: name, SecretString: formatEventKey(testOperatorKey(op.resource)), VersionStages: [stage] }));
  } finally {
    sm.destroy();
  }
  return { AWS_ENDPOINT_URL_SECRETS_MANAGER: endpoint };
}
