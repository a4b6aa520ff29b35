// The Node.js runtime interface client (aws-lambda-ric from npm): what a Lambda Node runtime runs
// as its bootstrap, the process that asks the Runtime API for the next invocation, loads the
// handler and posts its answer. Installed once per machine into the cache, never into a
// project's node_modules (build-once.ts: serialized across processes, never half-built). It has a
// native part: its install script builds curl and aws-lambda-cpp from the sources it ships, then
// the addon with node-gyp, so the build tools are checked first and a missing one is named.
import { spawn, spawnSync } from "node:child_process";
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { buildOnceInto } from "./build-once.ts";
import { SetupError } from "./errors.ts";
import { cacheRoot } from "./paths.ts";

/** The pinned release: the one source of truth (Node ≥ 22, as crdfn's Lambda runtime). */
export const LAMBDA_RIC_VERSION = "4.0.2";

/**
 * What its native build runs, and the Debian package that brings each: the bundled curl's
 * `configure` and make, aws-lambda-cpp's CMake, node-gyp (Python, a C++ compiler), and tar
 * unpacking the .tar.xz sources. (The curl sources ship a generated `configure`, so autoconf,
 * automake and libtool are not needed.)
 */
const BUILD_TOOLS: ReadonlyArray<{ command: string; alternatives?: string[]; debian: string }> = [
  { command: "cmake", alternatives: ["cmake3"], debian: "cmake" },
  { command: "make", debian: "make" },
  { command: "cc", alternatives: ["gcc"], debian: "gcc" },
  { command: "c++", alternatives: ["g++"], debian: "g++" },
  { command: "python3", debian: "python3" },
  { command: "xz", debian: "xz-utils" },
];

export interface LambdaRicOptions {
  env: NodeJS.ProcessEnv;
  log: (line: string) => void;
}

const onPath = (command: string, env: NodeJS.ProcessEnv): boolean => spawnSync("sh", ["-c", `command -v ${command}`], { env, stdio: "ignore" }).status === 0;

/** The build tools that are missing, by their Debian package. */
export function missingBuildTools(env: NodeJS.ProcessEnv, has: (command: string) => boolean = (c) => onPath(c, env)): string[] {
  return BUILD_TOOLS.filter((t) => ![t.command, ...(t.alternatives ?? [])].some(has)).map((t) => t.debian);
}

/** The client's entry (its bin, index.mjs), installed on first use. */
export async function lambdaRic({ env, log }: LambdaRicOptions): Promise<string> {
  const dir = join(cacheRoot(env), `lambda-ric-${LAMBDA_RIC_VERSION}`);
  const pkg = (root: string) => join(root, "node_modules", "aws-lambda-ric");
  const complete = () => existsSync(join(pkg(dir), "index.mjs")) && existsSync(join(pkg(dir), "rapid-client.node"));
  if (!complete()) {
    await buildOnceInto({
      what: `the Lambda runtime interface client (aws-lambda-ric ${LAMBDA_RIC_VERSION})`,
      dir,
      complete,
      staleLockMs: 1800_000,
      pollMs: 2000,
      log,
      build: async (tmp) => {
        const missing = missingBuildTools(env);
        if (missing.length > 0)
          throw new SetupError(
            `aws-lambda-ric ${LAMBDA_RIC_VERSION} builds a native part, and ${missing.join(", ")} ${missing.length === 1 ? "is" : "are"} missing: apt-get install -y ${missing.join(" ")}`,
          );
        await npmInstall(tmp, env, log);
        if (!existsSync(join(pkg(tmp), "rapid-client.node")))
          throw new SetupError(`npm installed aws-lambda-ric ${LAMBDA_RIC_VERSION} into ${tmp} without its native addon (rapid-client.node)`);
      },
    });
  }
  return join(pkg(dir), "index.mjs");
}

/** The lines of its install scripts worth showing: each step as it starts or ends. */
const STEP = /^(Building|Extracting|curl build complete|aws-lambda-cpp build complete|rapid-client\.node copied|Postinstall complete)/;

async function npmInstall(prefix: string, env: NodeJS.ProcessEnv, log: (line: string) => void): Promise<void> {
  log(
    `installing the Lambda runtime interface client (aws-lambda-ric ${LAMBDA_RIC_VERSION}) from npm (first run only; it compiles curl and aws-lambda-cpp: 3–8 min on 2 cores)`,
  );
  log(`  cache: ${prefix.replace(/\.tmp-\d+$/, "")}`);
  const started = Date.now();
  const npm = process.platform === "win32" ? "npm.cmd" : "npm";
  // Its install scripts are the native build: approved by name in the folder's own package.json
  // (npm 11 only warns about unapproved ones, and is moving to refusing them; its --allow-scripts
  // flag is refused in a folder with a package.json, which --prefix makes it). By name, not
  // pinned: a pin needs the lockfile's resolved URLs, which an npmrc may omit; the install
  // command pins the version.
  writeFileSync(
    join(prefix, "package.json"),
    `${JSON.stringify({ name: "crdfn-lambda-ric", private: true, allowScripts: { "aws-lambda-ric": true } }, null, 2)}\n`,
  );
  // --foreground-scripts: the scripts' own lines come through, to show progress.
  const args = ["install", "--prefix", prefix, "--no-audit", "--no-fund", "--foreground-scripts", "--loglevel=error", `aws-lambda-ric@${LAMBDA_RIC_VERSION}`];
  const child = spawn(npm, args, {
    cwd: prefix,
    env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let tail: string[] = [];
  const onOutput = (chunk: Buffer) => {
    const lines = chunk.toString().split("\n").filter(Boolean);
    for (const line of lines) if (STEP.test(line)) log(`  ${line}`);
    tail = [...tail, ...lines].slice(-20);
  };
  child.stdout.on("data", onOutput);
  child.stderr.on("data", onOutput);
  const ticker = setInterval(() => log(`  …${Math.round((Date.now() - started) / 1000)}s`), 30_000);
  const code = await new Promise<number | string | null>((resolve) => {
    child.on("error", (e) => resolve(e.message));
    child.on("close", resolve);
  });
  clearInterval(ticker);
  if (code !== 0)
    throw new SetupError(
      `installing aws-lambda-ric ${LAMBDA_RIC_VERSION} failed (npm install: ${typeof code === "string" ? code : `exit ${code}`}):\n${tail.join("\n")}`,
    );
  log(`installed aws-lambda-ric ${LAMBDA_RIC_VERSION} in ${Math.round((Date.now() - started) / 1000)}s`);
}
