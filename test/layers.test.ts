// `npm run layers` is only worth its place if it fails on the imports it forbids: a probe file
// with one forbidden import is placed in the layer and the check must name the broken rule.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, it } from "node:test";

const run = promisify(execFile);
const root = join(import.meta.dirname, "..");
const depcruise = join(root, "node_modules", "dependency-cruiser", "bin", "dependency-cruiser.mjs");

async function violations(dir: string, source: string): Promise<string> {
  const probe = join(dir, `layers-probe-${randomBytes(4).toString("hex")}.ts`);
  writeFileSync(join(root, probe), source);
  try {
    await run(process.execPath, [depcruise, "--config", ".dependency-cruiser.cjs", probe], { cwd: root });
    return "";
  } catch (e) {
    return (e as { stdout?: string }).stdout ?? String(e);
  } finally {
    rmSync(join(root, probe), { force: true });
  }
}

describe("the layering check", { timeout: 120_000 }, () => {
  it("fails when core/ imports a client library", async () => {
    assert.match(await violations("core", 'import { pino } from "pino";\nexport const p = pino;\n'), /pure-layers-import-only-zod-and-yaml/);
  });
  it("fails when core/ imports the Kubernetes client", async () => {
    assert.match(
      await violations("core", 'import { KubeConfig } from "@kubernetes/client-node";\nexport const k = KubeConfig;\n'),
      /pure-layers-import-only-zod-and-yaml/,
    );
  });
  it("fails when core/ does I/O", async () => {
    assert.match(await violations("core", 'import { readFileSync } from "node:fs";\nexport const r = readFileSync;\n'), /pure-layers-do-no-io/);
  });
  it("fails when core/ imports what generates deploy files", async () => {
    assert.match(await violations("core", 'import { crdOf } from "../deploy/crd.ts";\nexport const c = crdOf;\n'), /core-imports-no-layer/);
  });
  it("fails when the functions or the bridge import deploy/", async () => {
    assert.match(
      await violations("functions/runtime", 'import { bridgeName } from "../../deploy/bridge.ts";\nexport const b = bridgeName;\n'),
      /production-not-deploy/,
    );
    assert.match(await violations("bridge", 'import { rbacRulesOf } from "../deploy/rbac.ts";\nexport const r = rbacRulesOf;\n'), /production-not-deploy/);
  });
  it("fails when deploy/ imports a layer above core/ or does I/O", async () => {
    assert.match(await violations("deploy", 'import { KubeHttp } from "../clients/kube-http.ts";\nexport const k = KubeHttp;\n'), /deploy-imports-core-only/);
    assert.match(await violations("deploy", 'import { writeFileSync } from "node:fs";\nexport const w = writeFileSync;\n'), /pure-layers-do-no-io/);
  });
  it("passes deploy/ importing core/, and the CLI importing deploy/", async () => {
    assert.equal(await violations("deploy", 'import { defineOperator } from "../core/operator.ts";\nexport const d = defineOperator;\n'), "");
    assert.equal(await violations("cli", 'import { crdOf } from "../deploy/crd.ts";\nexport const c = crdOf;\n'), "");
  });
  it("fails when the bridge imports the functions", async () => {
    assert.match(
      await violations("bridge", 'import { createRuntime } from "../functions/runtime/runtime.ts";\nexport const c = createRuntime;\n'),
      /bridge-not-functions/,
    );
  });
  it("fails when an example reaches past the public entry points", async () => {
    const found = await violations("examples", 'import { createRuntime } from "../functions/runtime/runtime.ts";\nexport const c = createRuntime;\n');
    assert.match(found, /examples-use-the-public-api/);
    assert.match(found, /examples-import-by-package-name/);
  });
  it("fails when the functions import the AWS SDK where a cold start loads it", async () => {
    assert.match(
      await violations("functions/adapters", 'import { SQSClient } from "@aws-sdk/client-sqs";\nexport const c = SQSClient;\n'),
      /functions-load-the-aws-sdk-lazily/,
    );
    assert.equal(
      await violations(
        "functions/adapters",
        'import type { SQSClient } from "@aws-sdk/client-sqs";\nexport const c = (): Promise<SQSClient> => import("@aws-sdk/client-sqs").then((m) => new m.SQSClient({}));\n',
      ),
      "",
    );
  });
  it("fails when cli/'s floors are crossed: the local stack, an admin command or a generator importing a command", async () => {
    assert.match(await violations("cli/local", 'import { dlqCommand } from "../admin/dlq.ts";\nexport const d = dlqCommand;\n'), /cli-local-runs-no-command/);
    assert.match(await violations("cli/local", 'import { devCommand } from "../dev-command.ts";\nexport const d = devCommand;\n'), /cli-local-runs-no-command/);
    assert.match(await violations("cli/admin", 'import { generate } from "../generate/generate.ts";\nexport const g = generate;\n'), /cli-admin-stands-alone/);
    assert.match(
      await violations("cli/admin", 'import { startPipeline } from "../local/pipeline.ts";\nexport const s = startPipeline;\n'),
      /cli-admin-stands-alone/,
    );
    assert.match(
      await violations("cli/generate", 'import { startPipeline } from "../local/pipeline.ts";\nexport const s = startPipeline;\n'),
      /cli-generate-stands-alone/,
    );
    assert.match(await violations("cli", 'import { redrive } from "./admin/dlq.ts";\nexport const r = redrive;\n'), /cli-plumbing-is-the-ground-floor/);
  });
  it("passes the local stack importing cli/'s plumbing", async () => {
    assert.equal(await violations("cli/local", 'import { loadOperator } from "../operators.ts";\nexport const l = loadOperator;\n'), "");
  });
  it("passes a file that keeps the rules", async () => {
    assert.equal(await violations("examples", 'import { defineOperator } from "crdfn";\nexport const d = defineOperator;\n'), "");
  });
});
