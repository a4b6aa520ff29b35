// The local Pub/Sub server of tests and the emulator: Google's own fake from its Go client
// library (cloud.google.com/go/pubsub/v2/pstest), served over gRPC on a free loopback port.
//
// Why this one. The Pub/Sub emulators a registry here serves, read in their source and tried:
//
// | emulator (registry)                 | ordering keys                 | push | dead letter, max attempts        | retry policy    | ack deadline, modAck | seek                  |
// |-------------------------------------|-------------------------------|------|----------------------------------|-----------------|----------------------|-----------------------|
// | pstest v2.6.0 (Go module proxy)     | yes, one message out per key  | no   | yes                              | stored, unused  | yes                  | by time; loses bodies |
// | pstest v2.6.1–v2.8.1 (Go proxy)     | same                          | no   | broken: forwarded on every pull, | stored, unused  | yes, per-delivery    | same                  |
// |                                     |                               |      | never removed, its key stuck     |                 | ack ids              |                       |
// | pstest v1.52.0 (Go proxy)           | same as v2.6.0                | no   | same as v2.6.0                   | stored, unused  | yes                  | same (needs Go 1.26)  |
// | gcloud's emulator (Java)            | not obtainable: a gcloud component (apt google-cloud-cli-pubsub-emulator), |
// |                                     | not on Maven Central; the apt source is off on this machine                 |
// | npm, crates.io, PyPI                | no emulator: npm packages found wrap gcloud's; crates are clients           |
//
// "One message out per key": pstest hands out a key's oldest unacknowledged message, and only
// when none of the key is outstanding. Dead letter: once a message has been delivered
// maxDeliveryAttempts times, the next time it would be delivered it goes to the dead-letter
// topic instead and its key moves on. v2.6.0 is pinned: the last release whose dead-lettering
// works (from v2.6.1 the ack that removes a dead-lettered message carries no delivery number and
// is ignored as stale). Its ack ids are message ids, so an ack from an earlier delivery would
// ack a redelivery; the push deliverer never holds two deliveries of a message at once.
// What pstest lacks is made up in emulator/pubsub-push.ts: it never pushes (the deliverer pulls
// and POSTs) and ignores the retry policy (the deliverer holds a refused message for the
// backoff). Its other differences from Pub/Sub: messages live in memory only (a restart loses
// them); a message neither acknowledged nor outstanding 10 minutes after it was published is
// dropped (Pub/Sub keeps 7 days by default); a dead-lettered message keeps its id and gets no
// CloudPubSubDeadLetter* attributes.
import { mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { withSetupDefaults, type BinaryOptions } from "./binaries.ts";
import { pinnedPstestVersion, pubSubEmulatorBinary } from "./pubsub-binary.ts";
import { startEmbedded, startServer, type RunningServer } from "./process.ts";
import type { Reaper } from "./reaper.ts";

/** The project of every local topic and subscription (the emulator accepts any). */
export const LOCAL_PUBSUB_PROJECT = "crdfn-local";

export interface PubSubEmulatorOptions {
  binary: string;
  dir: string;
  port: number;
  reaper: Reaper;
}

/** Starts the emulator on 127.0.0.1:`port`; it is ready once it says it listens. */
export async function startPubSubEmulator(o: PubSubEmulatorOptions): Promise<RunningServer> {
  mkdirSync(o.dir, { recursive: true });
  const logFile = join(o.dir, "pubsub-emulator.log");
  return startServer(
    {
      name: "the Pub/Sub emulator",
      command: o.binary,
      args: ["-addr", `127.0.0.1:${o.port}`],
      logFile,
      cwd: o.dir,
      // infra/pubsub/main.go prints this line after the port is bound and before it serves.
      ready: () => Promise.resolve(readFileSync(logFile, "utf8").includes(`listening on 127.0.0.1:${o.port}`)),
    },
    o.reaper,
  );
}

export interface LocalPubSub {
  /** host:port, as PUBSUB_EMULATOR_HOST spells it. */
  host: string;
  projectId: string;
  /** The pstest release, or "external" for CRDFN_PUBSUB_EMULATOR_HOST. */
  version: string;
  /** PUBSUB_EMULATOR_HOST and PUBSUB_PROJECT_ID, which point Google's client libraries here. */
  env: Record<string, string>;
  /** Stops the embedded server and removes its files (an external emulator is left alone). Idempotent. */
  stop(): Promise<void>;
}

/**
 * A running Pub/Sub emulator: the one CRDFN_PUBSUB_EMULATOR_HOST names, or an embedded pstest
 * (built on first use). It holds nothing until topics are created (see pubsub-resources.ts).
 */
export async function startLocalPubSub(opts: Partial<BinaryOptions> = {}): Promise<LocalPubSub> {
  const { env, log } = withSetupDefaults(opts);
  const external = env.CRDFN_PUBSUB_EMULATOR_HOST;
  if (external) return local(external, "external", () => Promise.resolve());
  const binary = await pubSubEmulatorBinary({ env, log });
  log("starting the Pub/Sub emulator…");
  const { port, stop } = await startEmbedded("crdfn-pubsub", (at) => startPubSubEmulator({ binary, ...at }));
  return local(`127.0.0.1:${port}`, pinnedPstestVersion(), stop);
}

function local(host: string, version: string, stop: () => Promise<void>): LocalPubSub {
  return {
    host,
    projectId: LOCAL_PUBSUB_PROJECT,
    version,
    env: { PUBSUB_EMULATOR_HOST: host, PUBSUB_PROJECT_ID: LOCAL_PUBSUB_PROJECT },
    stop,
  };
}
