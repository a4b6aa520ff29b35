// An object named on the command line that is not there (a typo, the wrong namespace) is a setup
// error of `crdfn replay` and `crdfn diff` alike: one line naming the namespace, exit 2, and
// nothing written. Run as a person runs them, against a real API server. The setup errors met
// before any server answers are in cli/setup-errors.test.ts.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { loadOperator } from "../cli/operators.ts";
import { packageRoot } from "../emulator/paths.ts";
import { runCrdfn, type CliResult } from "./support/crdfn-cli.ts";
import { crApi, startEnv, type Env } from "./support/functions-environment.ts";

const operatorSource = `import { z } from "zod";
import { defineOperator } from "crdfn";

export default defineOperator({
  resource: { group: "example.com", version: "v1", plural: "greetings", kind: "Greeting" },
  spec: z.object({ message: z.string().min(1) }),
  reconcile: () => ({ status: {} }),
});
`;

describe("an object that is not there, named to crdfn replay and crdfn diff", { timeout: 300_000 }, () => {
  let env: Env;
  let work: string;
  let file: string;
  const crdfn = (args: string[]): Promise<CliResult> =>
    runCrdfn(args, { cwd: work, env: { PATH: process.env.PATH, HOME: process.env.HOME, ...env.cluster.env } });

  before(async () => {
    mkdirSync(join(packageRoot, ".crdfn"), { recursive: true });
    // Beside the package, so the operator file's `import "crdfn"` resolves as in a user's project.
    work = mkdtempSync(join(packageRoot, ".crdfn", "cli-setup-errors-"));
    file = join(work, "operator.ts");
    writeFileSync(file, operatorSource);
    const op = await loadOperator(file);
    env = await startEnv([op], { file: import.meta.filename, identities: false });
    await crApi(env, op).create("hello", { message: "hi" });
  });
  after(async () => {
    await env?.cluster.stop();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  const notFound = (name: string, ns: string) =>
    `crdfn: greeting/${name}: not found in namespace ${ns} (-n names another; kubectl get greetings -A lists them)\n`;

  it("crdfn replay greeting/helo (a typo): not found in the namespace, exit 2", async () => {
    const ns = env.cluster.namespace;
    const r = await crdfn(["replay", "greeting/helo", "-n", ns, "--operator", file]);
    assert.deepEqual([r.stderr, r.stdout, r.code], [notFound("helo", ns), "", 2]);
  });

  it("crdfn replay greeting/hello in the wrong namespace: the same, naming that namespace", async () => {
    const wrong = env.cluster.ns("elsewhere");
    const r = await crdfn(["replay", "greeting/hello", "-n", wrong, "--operator", file]);
    assert.deepEqual([r.stderr, r.stdout, r.code], [notFound("hello", wrong), "", 2]);
  });

  it("crdfn replay greeting/hello where it is: reconciled (the refusal is only for what is not there)", async () => {
    const r = await crdfn(["replay", "greeting/hello", "-n", env.cluster.namespace, "--operator", file]);
    assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
    assert.match(r.stdout, /^outcome: success \(reconciled\)$/m);
  });

  it("crdfn diff greeting/helo: not found in the namespace, exit 2", async () => {
    const ns = env.cluster.namespace;
    const r = await crdfn(["diff", "greeting/helo", "-n", ns, "--operator", file]);
    assert.deepEqual([r.stderr, r.code], [`crdfn: greeting/helo: not found in namespace ${ns}\n`, 2]);
  });
});
