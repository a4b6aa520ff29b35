// moto's server, a Secrets Manager-compatible endpoint on loopback for the tests that read event
// keys from a secret (test/event-keys-secret.test.ts): installed once per machine from PyPI into
// a venv under the cache, pinned, counted only once pip succeeded (a marker), serialized by the
// build lock as the other prepared tools are.
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { existsSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { join } from "node:path";
import { withBuildLock } from "../../emulator/build-once.ts";
import { cacheRoot } from "../../emulator/paths.ts";

const MOTO_VERSION = "5.2.5";

async function motoServerBinary(env: NodeJS.ProcessEnv, log: (line: string) => void): Promise<string> {
  const venv = join(cacheRoot(env), "moto", MOTO_VERSION);
  const marker = join(venv, ".crdfn-installed");
  const complete = () => existsSync(marker);
  if (!complete())
    await withBuildLock({ what: `moto ${MOTO_VERSION}`, dir: venv, complete, staleLockMs: 900_000, pollMs: 3000, log }, async () => {
      rmSync(venv, { recursive: true, force: true });
      log(`installing moto[server] ${MOTO_VERSION} from PyPI (first run only; about 1 min)`);
      const made = spawnSync("python3", ["-m", "venv", venv], { encoding: "utf8", env });
      if (made.status !== 0) throw new Error(`python3 -m venv failed: ${(made.stderr || made.stdout).trim()}`);
      const pip = spawn(
        join(venv, "bin", "pip"),
        ["install", "--disable-pip-version-check", "--no-input", "--progress-bar", "off", `moto[server]==${MOTO_VERSION}`],
        {
          env,
          stdio: ["ignore", "ignore", "pipe"],
        },
      );
      let tail = "";
      pip.stderr.on("data", (c: Buffer) => (tail = (tail + c.toString()).slice(-2000)));
      const code = await new Promise<number | null>((resolve) => pip.on("close", resolve));
      if (code !== 0) {
        rmSync(venv, { recursive: true, force: true });
        throw new Error(`pip install moto[server]==${MOTO_VERSION} failed (${code}): ${tail}`);
      }
      writeFileSync(marker, `${MOTO_VERSION}\n`);
    });
  return join(venv, "bin", "moto_server");
}

const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });

export interface Moto {
  endpoint: string;
  stop(): Promise<void>;
}

/** A moto server on a free loopback port, answering once it is up. */
export async function startMoto(env: NodeJS.ProcessEnv = process.env, log: (line: string) => void = () => {}): Promise<Moto> {
  const bin = await motoServerBinary(env, log);
  const port = await freePort();
  const child: ChildProcess = spawn(bin, ["-H", "127.0.0.1", "-p", String(port)], { stdio: "ignore", env });
  const endpoint = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 30_000;
  for (;;) {
    try {
      await fetch(`${endpoint}/moto-api/`);
      break;
    } catch {
      if (Date.now() > deadline || child.exitCode !== null) {
        child.kill();
        throw new Error(`moto_server did not answer on ${endpoint}`);
      }
      await new Promise((r) => setTimeout(r, 200));
    }
  }
  return {
    endpoint,
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once("exit", () => resolve());
        child.kill();
      }),
  };
}
