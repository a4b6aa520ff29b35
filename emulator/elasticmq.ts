// ElasticMQ, the SQS-compatible server of tests and the emulator: its pinned release is
// resolved from Maven Central once (the classpath is cached), and each environment runs its
// own server with the crdfn queues and message storage on disk, so a restart loses nothing.
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { SetupError } from "./errors.ts";
import { cacheRoot, packageRoot } from "./paths.ts";
import { startServer, type RunningServer } from "./process.ts";
import { elasticMqQueuesConfig, type QueueDefinition } from "./queues.ts";
import type { Reaper } from "./reaper.ts";
import type { QueueStorage } from "./types.ts";

const pomDir = join(packageRoot, "infra", "elasticmq");

export function pinnedElasticMqVersion(): string {
  const m = /<elasticmq\.version>([^<]+)<\/elasticmq\.version>/.exec(readFileSync(join(pomDir, "pom.xml"), "utf8"));
  if (!m?.[1]) throw new SetupError("infra/elasticmq/pom.xml does not pin elasticmq.version");
  return m[1];
}

const javaMissing = (what: string) =>
  new SetupError(
    `${what} is not installed, and it is needed to run ElasticMQ, the local SQS server: install a JDK ≥ 17 and Maven, ` +
      `or set CRDFN_SQS_ENDPOINT to an existing SQS-compatible endpoint`,
  );

/** Resolves (once) and returns the ElasticMQ server classpath. */
export function elasticMqClasspath(env: NodeJS.ProcessEnv, log: (line: string) => void): string {
  const version = pinnedElasticMqVersion();
  const pom = readFileSync(join(pomDir, "pom.xml"));
  const dir = join(cacheRoot(env), "elasticmq", `${version}-${createHash("sha256").update(pom).digest("hex").slice(0, 12)}`);
  const file = join(dir, "classpath.txt");
  if (existsSync(file)) {
    const cp = readFileSync(file, "utf8").trim();
    // A cleaned ~/.m2 invalidates the cached classpath.
    if (cp.split(":").every((jar) => existsSync(jar))) return cp;
  }
  if (spawnSync("java", ["-version"], { env }).error) throw javaMissing("Java");
  if (spawnSync("mvn", ["-v"], { env }).error) throw javaMissing("Maven");
  log(`resolving ElasticMQ ${version} from Maven Central (first run only)…`);
  mkdirSync(dir, { recursive: true });
  const tmp = `${file}.${process.pid}`;
  const mvn = spawnSync("mvn", ["-B", "-q", "dependency:build-classpath", `-Dmdep.outputFile=${tmp}`], {
    cwd: pomDir,
    env,
    encoding: "utf8",
  });
  if (mvn.status !== 0 || !existsSync(tmp)) {
    throw new SetupError(`resolving ElasticMQ ${version} with Maven failed:\n${(mvn.stdout + mvn.stderr).trim().split("\n").slice(-15).join("\n")}`);
  }
  renameSync(tmp, file);
  return readFileSync(file, "utf8").trim();
}

export interface ElasticMqOptions {
  classpath: string;
  dir: string;
  port: number;
  queues: QueueDefinition[];
  reaper: Reaper;
  region: string;
  /** JVM options after the defaults (a benchmark's comparison; nothing else sets them). */
  jvmArgs?: readonly string[];
  /** Default "disk"; "memory" only for a benchmark's stand-in for SQS. */
  storage?: QueueStorage;
}

export async function startElasticMq(o: ElasticMqOptions): Promise<RunningServer> {
  mkdirSync(o.dir, { recursive: true });
  const conf = join(o.dir, "elasticmq.conf");
  writeFileSync(
    conf,
    [
      `include classpath("application.conf")`,
      `node-address { protocol = http, host = "127.0.0.1", port = ${o.port}, context-path = "" }`,
      `rest-sqs { enabled = true, bind-port = ${o.port}, bind-hostname = "127.0.0.1", sqs-limits = strict }`,
      `rest-stats { enabled = false }`,
      `aws { region = "${o.region}", accountId = "000000000000" }`,
      // Messages live in an H2 file, so stopping the server (an outage test) keeps them, as SQS would.
      // ElasticMQ 1.7 answers a send/delete only after its storage actor wrote it, but H2 commits
      // to its file up to WRITE_DELAY (500 ms) later: a SIGKILL in between lost acknowledged
      // messages. WRITE_DELAY=0 writes the MVStore on every commit (the OS page cache then holds
      // it: a killed process loses nothing; only a crash of the machine itself could).
      o.storage === "memory"
        ? `messages-storage { enabled = false }`
        : `messages-storage { enabled = true, uri = "jdbc:h2:${join(o.dir, "messages")};WRITE_DELAY=0", driver-class = "org.h2.Driver", prune-data-on-init = false }`,
      elasticMqQueuesConfig(o.queues),
    ].join("\n"),
  );
  const url = `http://127.0.0.1:${o.port}`;
  return startServer(
    {
      name: "ElasticMQ",
      command: "java",
      args: [
        "-Xmx384m",
        "-XX:+UseSerialGC",
        // The JVM's full tiered compilation, not C1 alone (-XX:TieredStopAtLevel=1): it starts
        // ~0.5 s slower, but a steady stream costs about 2 ms of CPU per message where C1's cost
        // grew from 3 to 5.5 ms over 60,000 messages (`npm run bench:queuedepth -- --steady`).
        "-Xshare:auto",
        ...(o.jvmArgs ?? []),
        `-Dconfig.file=${conf}`,
        "-cp",
        o.classpath,
        "org.elasticmq.server.Main",
      ],
      logFile: join(o.dir, "elasticmq.log"),
      cwd: o.dir,
      ready: async () => {
        const res = await fetch(`${url}/?Action=ListQueues`);
        const body = await res.text();
        return res.ok && o.queues.every((q) => body.includes(`/${q.name}<`));
      },
    },
    o.reaper,
  );
}
