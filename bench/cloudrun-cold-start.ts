// `npm run bench:cold:cloudrun`: a Cloud Run function's cold start, as its build deploys it: the
// project's source with its node_modules, unbundled (Google's Node.js buildpack installs the
// dependencies and runs functions-framework on package.json's main). crdfn comes from its
// published form (`tsc -p tsconfig.build.json`: dist/ JavaScript), the Greeting's entry is
// examples/greeting/http.ts as a user's own JavaScript. In fresh Node processes: importing
// functions-framework and the entry (which registers `greeting`), then the first request: a push
// delivery of a malformed key event, for which the handler builds its runtime from the environment
// (settings, the cluster registry with a gke entry, Cloud Logging's logger and metrics) and
// answers 422 without calling a server — as `npm run bench:cold` does for the Lambda bundle. A
// cluster's API client is built on that cluster's first event and is not in it. Also the same
// entry bundled by esbuild into one file as the Lambda bundle is (what a `gcp-build` script could
// deploy instead), and the wall time from spawning the functions-framework command to its first answer.
import { execFile, spawn } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { build } from "esbuild";
import { clientNodeLeftOut } from "../cli/esbuild-plugins.ts";
import { packageRoot } from "../emulator/paths.ts";
import { percentile } from "./stats.ts";

const run = promisify(execFile);
const RUNS = Number(process.env.BENCH_RUNS ?? 15);

// What the deployed Greeting function has (deploy/gcp.ts), and what Cloud Run sets.
const functionEnv = {
  K_SERVICE: "crdfn-shop-greeting",
  CRDFN_CLUSTERS: JSON.stringify({
    prod: { auth: "gke", server: "https://34.1.2.3", caData: Buffer.from("-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n").toString("base64") },
  }),
  CRDFN_PUBSUB_TOPIC: "projects/my-project/topics/crdfn-shop-greeting-events",
  // Secret Manager's value, as Cloud Run puts it into the environment (deploy/gcp.ts).
  CRDFN_EVENT_KEYS: `k1:${Buffer.alloc(32, 1).toString("base64")}`,
  CRDFN_MAX_DELIVERY_ATTEMPTS: "5",
  LOG_LEVEL: "silent",
};
const pushBody = JSON.stringify({
  message: { data: Buffer.from("{not json").toString("base64"), messageId: "m-1", orderingKey: "greetings.default.x~0" },
  subscription: "projects/my-project/subscriptions/crdfn-shop-greeting-events",
  deliveryAttempt: 1,
});

/** In one fresh process: import functions-framework and the entry, then the first request. */
const probe = (entry: string, framework: string): string => `
  const t0 = performance.now();
  const ff = await import(${JSON.stringify(framework)});
  const getTestServer = ff.getTestServer ?? ff.default.getTestServer;
  await import(${JSON.stringify(entry)});
  const t1 = performance.now();
  const server = getTestServer("greeting");
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  const res = await fetch("http://127.0.0.1:" + server.address().port + "/", { method: "POST", headers: { "content-type": "application/json" }, body: ${JSON.stringify(pushBody)} });
  await res.text();
  const t2 = performance.now();
  if (res.status !== 422) throw new Error("unexpected answer " + res.status);
  server.close();
  process.stdout.write(JSON.stringify({ importMs: t1 - t0, firstRequestMs: t2 - t1, rssMiB: process.memoryUsage().rss / 1048576 }));`;

const freePort = () =>
  new Promise<number>((resolve) => {
    const s = createServer().listen(0, "127.0.0.1", () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });

/** From spawning `functions-framework --target greeting` to its first answer, in ms. */
async function spawnToFirstAnswer(app: string): Promise<number> {
  const port = await freePort();
  const t0 = performance.now();
  const child = spawn(
    process.execPath,
    [join(app, "node_modules", "@google-cloud", "functions-framework", "build", "src", "main.js"), "--target=greeting", `--port=${port}`, `--source=${app}`],
    {
      cwd: app,
      env: { PATH: process.env.PATH ?? "", ...functionEnv },
      stdio: "ignore",
    },
  );
  try {
    for (;;) {
      try {
        const res = await fetch(`http://127.0.0.1:${port}/`, { method: "POST", headers: { "content-type": "application/json" }, body: pushBody });
        await res.text();
        if (res.status !== 422) throw new Error(`unexpected answer ${res.status}`);
        return performance.now() - t0;
      } catch (e) {
        if ((e as Error).message.startsWith("unexpected")) throw e;
        await new Promise((r) => setTimeout(r, 5));
      }
    }
  } finally {
    child.kill("SIGKILL");
  }
}

type Sample = { importMs: number; firstRequestMs: number; rssMiB: number };
const median = (xs: number[]): number =>
  percentile(
    [...xs].sort((a, b) => a - b),
    50,
  );

const work = mkdtempSync(join(tmpdir(), "crdfn-cold-cloudrun-"));
try {
  // crdfn as published: its JavaScript and package.json; its dependencies from this checkout's node_modules.
  const pkg = join(work, "crdfn");
  await run(
    process.execPath,
    [
      join(packageRoot, "node_modules", "typescript", "bin", "tsc"),
      "-p",
      join(packageRoot, "tsconfig.build.json"),
      "--outDir",
      join(pkg, "dist"),
      "--declaration",
      "false",
      "--sourceMap",
      "false",
    ],
    { cwd: packageRoot },
  );
  cpSync(join(packageRoot, "package.json"), join(pkg, "package.json"));
  symlinkSync(join(packageRoot, "node_modules"), join(work, "node_modules"));
  // The user's project: its entry as JavaScript, crdfn installed beside the rest.
  const app = join(work, "app");
  mkdirSync(join(app, "node_modules", "@google-cloud"), { recursive: true });
  symlinkSync(pkg, join(app, "node_modules", "crdfn"));
  symlinkSync(join(packageRoot, "node_modules", "@google-cloud", "functions-framework"), join(app, "node_modules", "@google-cloud", "functions-framework"));
  writeFileSync(join(app, "package.json"), JSON.stringify({ name: "greeting", type: "module", main: "http.mjs" }));
  await build({
    entryPoints: [join(packageRoot, "examples", "greeting", "http.ts")],
    outfile: join(app, "http.mjs"),
    bundle: true,
    packages: "external",
    platform: "node",
    format: "esm",
    target: "node22",
    logLevel: "warning",
  });
  // The same, bundled whole (functions-framework and crdfn included).
  const bundle = join(work, "bundled", "http.mjs");
  await build({
    stdin: {
      contents: `import { getTestServer } from "@google-cloud/functions-framework/testing"; import "./app/http.mjs"; export { getTestServer };`,
      resolveDir: work,
      loader: "js",
    },
    outfile: bundle,
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node22",
    minify: true,
    logLevel: "error",
    // As the Lambda bundle: client-node left out (a gke entry needs none), and the Pub/Sub client,
    // which a function loads only to re-send a deferred message, left to node_modules.
    plugins: [clientNodeLeftOut],
    external: ["@google-cloud/pubsub"],
    banner: { js: "import { createRequire } from 'node:module'; const require = createRequire(import.meta.url);" },
  });

  const frameworkTesting = join(app, "node_modules", "@google-cloud", "functions-framework", "build", "src", "testing.js");
  const measure = async (entry: string, framework: string): Promise<Sample[]> => {
    const samples: Sample[] = [];
    for (let i = 0; i < RUNS; i++) {
      const { stdout } = await run(process.execPath, ["--input-type=module", "-e", probe(entry, framework)], {
        cwd: app,
        env: { PATH: process.env.PATH ?? "", ...functionEnv },
      });
      samples.push(JSON.parse(stdout) as Sample);
    }
    return samples;
  };
  const rows: Array<[string, Sample[], number | undefined]> = [];
  const spawned: number[] = [];
  for (let i = 0; i < RUNS; i++) spawned.push(await spawnToFirstAnswer(app));
  rows.push(["as deployed: the entry and its node_modules (unbundled)", await measure(join(app, "http.mjs"), frameworkTesting), median(spawned)]);
  rows.push(["bundled by esbuild as the Lambda is (client-node left out)", await measure(bundle, bundle), undefined]);

  console.log(
    `Cloud Run function cold start (examples/greeting/http.ts, functions-framework ${(JSON.parse(readFileSync(join(packageRoot, "node_modules", "@google-cloud", "functions-framework", "package.json"), "utf8")) as { version: string }).version}), Node ${process.version}, ${RUNS} fresh processes each`,
  );
  console.log(`| source | import ms | first request ms | cold init ms (import + first request) | spawn → first answer ms | RSS MiB |`);
  console.log(`|---|---|---|---|---|---|`);
  for (const [name, samples, wall] of rows) {
    const total = median(samples.map((s) => s.importMs + s.firstRequestMs));
    console.log(
      `| ${name} | ${median(samples.map((s) => s.importMs)).toFixed(0)} | ${median(samples.map((s) => s.firstRequestMs)).toFixed(0)} | ${total.toFixed(0)} | ${wall === undefined ? "–" : wall.toFixed(0)} | ${median(samples.map((s) => s.rssMiB)).toFixed(0)} |`,
    );
  }
  console.log(
    `bundle ${(statSync(bundle).size / 1024).toFixed(0)} KiB; medians; load average ${readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ")}`,
  );
} finally {
  rmSync(work, { recursive: true, force: true });
}
