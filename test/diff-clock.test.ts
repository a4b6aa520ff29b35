// `crdfn diff` as a gate a timer-stamping operator can pass: an operator that writes ctx.now into
// its status (`lastTick`) shows no change and exits 0 with the code it runs, and still shows what a
// changed one would change; an object that has no status yet prints its new status field by field.
// Run as a person runs it (its own process, the operator on disk), on a real API server.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { loadOperator } from "../cli/operators.ts";
import { packageRoot } from "../emulator/paths.ts";
import { runCrdfn, type CliResult } from "./support/crdfn-cli.ts";
import { crApi, startEnv, type Env } from "./support/functions-environment.ts";

/** A ticking operator: its status stamps ctx.now (to the millisecond and as a date) beside `phase`. */
const operatorSource = (phase: string) => `import { z } from "zod";
import { defineOperator } from "crdfn";

export default defineOperator({
  resource: { group: "example.com", version: "v1", plural: "tickers", kind: "Ticker" },
  spec: z.object({ message: z.string() }),
  status: z.object({ phase: z.string(), lastTick: z.string(), day: z.string() }),
  owns: [{ group: "", version: "v1", kind: "ConfigMap" }],
  every: 10,
  reconcile(t, ctx) {
    return {
      children: [{ apiVersion: "v1", kind: "ConfigMap", metadata: { name: t.metadata.name + "-tick" }, data: { message: t.spec.message } }],
      status: { phase: ${JSON.stringify(phase)}, lastTick: ctx.now.toISOString(), day: ctx.now.toISOString().slice(0, 10) },
    };
  },
});
`;

describe("crdfn diff on an operator that stamps ctx.now into its status", { timeout: 300_000 }, () => {
  let env: Env;
  let work: string;
  const files = { deployed: "", changed: "" };
  const crdfn = (args: string[]): Promise<CliResult> =>
    runCrdfn(args, { cwd: work, env: { PATH: process.env.PATH, HOME: process.env.HOME, ...env.cluster.env } });

  before(async () => {
    mkdirSync(join(packageRoot, ".crdfn"), { recursive: true });
    // Beside the package, so the operator file's `import "crdfn"` resolves as in a user's project.
    work = mkdtempSync(join(packageRoot, ".crdfn", "diff-clock-"));
    files.deployed = join(work, "deployed.ts");
    files.changed = join(work, "changed.ts");
    writeFileSync(files.deployed, operatorSource("Ready"));
    writeFileSync(files.changed, operatorSource("Ticking"));
    const op = await loadOperator(files.deployed);
    env = await startEnv([op], { file: import.meta.filename, identities: false });
    await crApi(env, op).create("ticked", { message: "hi" });
    await crApi(env, op).create("fresh", { message: "hi" });
    // "ticked" reconciled as the function would (its status and child written), "fresh" never.
    const applied = await crdfn(["replay", "ticker/ticked", "-n", env.cluster.namespace, "--operator", files.deployed, "--apply"]);
    assert.equal(applied.code, 0, `${applied.stdout}\n${applied.stderr}`);
    assert.match((await crApi(env, op).get("ticked"))?.status?.lastTick as string, /^\d{4}-\d\d-\d\dT/);
  });
  after(async () => {
    await env?.cluster.stop();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it("with the code it runs: no change, the clock fields named as not compared, exit 0", async () => {
    const r = await crdfn(["diff", "ticker/ticked", "-n", env.cluster.namespace, "--operator", files.deployed]);
    assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
    assert.match(
      r.stdout,
      // status.day too, should the day have changed since the replay: only what differs from the live status is named.
      /^1 object\(s\): 0 would change .* 0 would fail, 1 unchanged; not compared, as they follow ctx\.now: (status\.day, )?status\.lastTick(, status\.day)? \(/m,
    );
    assert.equal(r.stdout.trim().split("\n").length, 1, r.stdout);
  });

  it("with a changed operator: the changed status field, and no clock field, exit 1", async () => {
    const r = await crdfn(["diff", "ticker/ticked", "-n", env.cluster.namespace, "--operator", files.changed]);
    assert.equal(r.code, 1, `${r.stdout}\n${r.stderr}`);
    assert.ok(r.stdout.includes(`Ticker ${env.cluster.namespace}/ticked\n  ~ status.phase: "Ready" → "Ticking"\n`), r.stdout);
    assert.ok(!r.stdout.includes("lastTick:") && !r.stdout.includes("status.day:"), r.stdout);
  });

  it("an object with no status yet: its new status field by field, none cut, no empty path", async () => {
    const r = await crdfn(["diff", "ticker/fresh", "-n", env.cluster.namespace, "--operator", files.deployed]);
    assert.equal(r.code, 1, `${r.stdout}\n${r.stderr}`);
    const ns = env.cluster.namespace;
    assert.ok(
      r.stdout.startsWith(
        `Ticker ${ns}/fresh\n  + ConfigMap ${ns}/fresh-tick (created)\n` +
          '  ~ status.conditions[0].message: + ""\n' +
          "  ~ status.conditions[0].observedGeneration: + 1\n" +
          '  ~ status.conditions[0].reason: + "Reconciled"\n' +
          '  ~ status.conditions[0].status: + "True"\n' +
          '  ~ status.conditions[0].type: + "Ready"\n' +
          "  ~ status.observedGeneration: + 1\n" +
          '  ~ status.phase: + "Ready"\n',
      ),
      r.stdout,
    );
    assert.ok(!r.stdout.includes("status.:") && !r.stdout.includes("..."), r.stdout);
  });
});
