// `crdfn dev --trace` as a person runs it: a real Jaeger (built from the Go module proxy on first
// use), kube-apiserver exporting its own spans to it, one spec change of a Greeting found there
// as one trace with the bridge's, the function's and the API server's spans, `crdfn trace`
// printing it, and the trace page opened in headless Chromium (playwright-core over the
// machine's Chromium: a browser download by playwright does not work everywhere).
import assert from "node:assert/strict";
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { promisify } from "node:util";
import { chromium } from "playwright-core";
import { readTraceState } from "../cli/trace-page/state.ts";
import { APISERVER_SERVICE, findChanges, objectIs, type Change } from "../cli/trace-page/traces.ts";
import { controlPlaneBinaries } from "../emulator/binaries.ts";
import { jaegerBinary } from "../emulator/jaeger.ts";
import { packageRoot } from "../emulator/paths.ts";
import { runCrdfn } from "./support/crdfn-cli.ts";
import { eventually } from "./support/eventually.ts";

const run = promisify(execFile);
const main = join(packageRoot, "cli", "main.ts");
const CHROMIUM = process.env.CRDFN_CHROMIUM ?? "/usr/bin/chromium";
const SCREENSHOT = process.env.CRDFN_TRACE_SCREENSHOT ?? join(tmpdir(), "crdfn-trace.png");
const BRIDGE = "crdfn-bridge";
// The Greeting operator's function, named as deployed (functions/runtime/entry.ts).
const FUNCTION = "crdfn-greeting";

describe("crdfn dev --trace", { timeout: 600_000 }, () => {
  let dev: ChildProcess;
  let output = "";
  let stateDir: string;
  let query: string;
  let page: string;
  let change: Change;
  let kubectlBin: string;
  const kubectl = async (...args: string[]) => (await run(kubectlBin, ["--kubeconfig", join(stateDir, "kubeconfig"), ...args], { encoding: "utf8" })).stdout;

  before(
    async () => {
      kubectlBin = (await controlPlaneBinaries({ env: process.env, log: () => {} })).kubectl;
      // Built here, under the cache's build lock, so dev's own start is not timed with the build.
      await jaegerBinary({ env: process.env, log: (line) => console.error(line) });
      stateDir = mkdtempSync(join(tmpdir(), "crdfn-trace-state-"));
      dev = spawn(process.execPath, ["--conditions=crdfn-source", main, "dev", "--trace", "--state-dir", stateDir], {
        detached: true,
        stdio: ["ignore", "pipe", "pipe"],
      });
      dev.stdout!.on("data", (c: Buffer) => (output += c.toString()));
      dev.stderr!.on("data", (c: Buffer) => (output += c.toString()));
      await eventually(() => assert.match(output, /✔ Greeting hello-world reconciled/), { timeoutMs: 240_000 });
      const line = /^ {2}traces: (http:\S+) /m.exec(output);
      assert.ok(line, `no traces: line in\n${output}`);
      page = line[1]!;
      const state = readTraceState(stateDir);
      assert.ok(state, "no trace.json in the state dir");
      assert.equal(state.page, page);
      query = state.query;
    },
    { timeout: 1_800_000 },
  );
  after(() => {
    if (dev && dev.exitCode === null && dev.signalCode === null) process.kill(-dev.pid!, "SIGKILL");
    if (stateDir) rmSync(stateDir, { recursive: true, force: true });
  });

  it("one spec change is one trace with the bridge's, the function's and kube-apiserver's spans", async () => {
    const before = output.split("\n").filter((l) => l.startsWith("✔ Greeting hello-world ")).length;
    await kubectl("patch", "greeting", "hello-world", "--type=merge", "-p", JSON.stringify({ spec: { message: `traced at ${Date.now()}` } }));
    await eventually(() => assert.ok(output.split("\n").filter((l) => l.startsWith("✔ Greeting hello-world ")).length > before), { timeoutMs: 60_000 });
    await eventually(
      async () => {
        const [newest] = await findChanges(query, { match: objectIs("greeting", "hello-world"), last: 1 });
        assert.ok(newest, "no change of greeting/hello-world in Jaeger yet");
        const services = new Set(newest.spans.map((s) => s.service));
        for (const s of [BRIDGE, FUNCTION, APISERVER_SERVICE]) assert.ok(services.has(s), `no ${s} span yet: ${[...services].join(", ")}`);
        // The status write the reconcile made, as the API server traced it.
        assert.ok(
          newest.spans.some((s) => s.service === APISERVER_SERVICE && /^(PUT|PATCH) .*\/status$/.test(s.name)),
          "no API server span of the status write",
        );
        change = newest;
      },
      { timeoutMs: 60_000 },
    );
    const byName = (service: string, name: string) => change.spans.find((s) => s.service === service && s.name === name);
    const root = byName(BRIDGE, "bridge change");
    const handle = byName(FUNCTION, "function handle");
    assert.ok(root && handle, change.spans.map((s) => `${s.service}: ${s.name}`).join("\n"));
    assert.equal(root.depth, 0);
    assert.equal(root.attributes["crdfn.object"], "example.com/greetings/default/hello-world");
    assert.ok(handle.startUs >= root.startUs, "the function handled the change before the bridge saw it");
    // The API server does not continue a traceparent from these identities: its spans are a trace
    // of its own, linked to the function's request span, and shown under it.
    for (const s of change.spans.filter((x) => x.service === APISERVER_SERVICE && x.linked)) {
      const parent = change.spans.find((p) => p.spanId === s.parentId);
      assert.ok(parent && parent.service !== APISERVER_SERVICE, `${s.name} links to ${parent?.service}: ${parent?.name}`);
      assert.notEqual(s.traceId, change.traceId);
    }
  });

  it("crdfn trace greeting/hello-world prints its last change as a waterfall", async () => {
    const r = await runCrdfn(["trace", "greeting/hello-world", "--last", "1", "--state-dir", stateDir], { cwd: packageRoot, env: process.env });
    assert.equal(r.code, 0, r.stderr);
    console.log(`crdfn trace greeting/hello-world --last 1:\n${r.stdout}`);
    const lines = r.stdout.trimEnd().split("\n");
    assert.match(lines[0]!, /example\.com\/greetings\/default\/hello-world .* ms {2}trace [0-9a-f]{32}$/);
    assert.ok(lines[0]!.includes(change.traceId) || lines.length > 1, lines[0]);
    const span = /^ +(\d+\.\d) +(\d+\.\d) {2}\|[ █]+\| {2}( *)(↪ )?([\w-]+): (.+)$/;
    for (const l of lines.slice(1)) assert.match(l, span);
    const parsed = lines.slice(1).map((l) => span.exec(l)!);
    assert.equal(parsed[0]![5], BRIDGE);
    assert.equal(parsed[0]![6], "bridge change");
    assert.equal(parsed[0]![1], "0.0");
    assert.ok(parsed.some((p) => p[5] === FUNCTION && p[6] === "function handle" && p[3]!.length > 0));
    assert.ok(parsed.some((p) => p[5] === APISERVER_SERVICE && p[4] === "↪ "));
  });

  it("the trace page finds the change by the object's name in headless Chromium", async () => {
    assert.ok(existsSync(CHROMIUM), `no Chromium at ${CHROMIUM}: install it (apt-get install chromium; .ci/run does) or set CRDFN_CHROMIUM`);
    const profile = mkdtempSync(join(tmpdir(), "crdfn-chromium-"));
    const browser = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: true,
      viewport: { width: 1400, height: 900 },
      args: [
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
      ],
    });
    try {
      const tab = await browser.newPage();
      await tab.goto(page);
      await tab.fill("#q", "hello-world");
      await tab.click("button");
      const row = tab.locator(`#changes tr[data-trace="${change.traceId}"]`);
      await row.waitFor({ timeout: 30_000 });
      assert.equal(await row.locator(".object").textContent(), "example.com/greetings/default/hello-world");
      await row.click();
      const labels = tab.locator("#waterfall .label");
      await tab
        .locator("#waterfall .label", { hasText: `${APISERVER_SERVICE}: ` })
        .first()
        .waitFor({ timeout: 30_000 });
      const texts = await labels.allTextContents();
      assert.ok(texts.includes(`${BRIDGE}: bridge change`), texts.join("\n"));
      assert.ok(texts.includes(`${FUNCTION}: function handle`), texts.join("\n"));
      await tab.screenshot({ path: SCREENSHOT, fullPage: true });
      console.log(`trace page screenshot: ${SCREENSHOT}`);
    } finally {
      await browser.close();
      rmSync(profile, { recursive: true, force: true });
    }
  });

  it("Ctrl-C stops the viewer with the rest; crdfn trace then says so in one line", async () => {
    process.kill(-dev.pid!, "SIGINT");
    await new Promise((resolve) => dev.once("exit", resolve));
    assert.match(output, /stopped\s*$/);
    assert.equal(readTraceState(stateDir), undefined, "trace.json outlived the viewer");
    const r = await runCrdfn(["trace", "greeting/hello-world", "--state-dir", stateDir], { cwd: packageRoot, env: process.env });
    assert.equal(r.code, 2);
    assert.equal(r.stderr.trim().split("\n").length, 1, r.stderr);
    assert.match(r.stderr, /^crdfn: no trace viewer runs for .*: start crdfn dev --trace/);
    const bad = await runCrdfn(["trace", "hello-world", "--query", "http://127.0.0.1:9"], { cwd: packageRoot, env: process.env });
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /^crdfn: hello-world: name the object as KIND\/NAME/);
    const down = await runCrdfn(["trace", "greeting/hello-world", "--query", query], { cwd: packageRoot, env: process.env });
    assert.equal(down.code, 2);
    assert.equal(down.stderr.trim().split("\n").length, 1, down.stderr);
    assert.match(down.stderr, /does not answer/);
    assert.ok(!existsSync(join(stateDir, "trace.json")));
  });
});
