// What `crdfn status` and `crdfn dlq` look at: every operator's FIFO event queue and its dead-letter
// queue (or on the Cloud Run target its topic, push subscription and dead-letter subscription), and
// the cluster. A deployment's come from its deploy settings (--settings, or the ./crdfn.deploy.yaml
// found when nothing local is set up, which it says); a local one's from the environment, else the
// `.crdfn/env` that `crdfn dev` / `crdfn cluster up` wrote.
import { existsSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import type { SQSClient } from "@aws-sdk/client-sqs";
import { parse } from "yaml";
import { deadLetterQueueUrl, eventQueueUrl, pubSubNamesOf, type PubSubNames } from "../../deploy/queue-names.ts";
import { parseQueueSettings } from "../../deploy/settings.ts";
import type { Operator } from "../../core/operator.ts";
import { operatorName } from "../../deploy/rbac.ts";
import type { PubSubSettings } from "../../clients/pubsub-client.ts";
import { SetupError } from "../../emulator/errors.ts";
import { DEFAULT_SETTINGS, loadOperator } from "../operators.ts";
import { defaultKubeconfig, readEnvFile } from "../environment.ts";
import { sqsClient, sqsSettingsOf } from "../../clients/sqs-client.ts";

export interface QueuePair {
  /** The operator whose queues these are; "" for the one local queue every operator shares. */
  operator: string;
  events: string;
  deadLetters: string;
}

/** An operator's Pub/Sub resources (the Cloud Run target). */
export interface PubSubPair {
  operator: string;
  names: PubSubNames;
}

export interface AdminTarget {
  /** SQS: each operator's queues (none on Pub/Sub). */
  pairs: QueuePair[];
  /** The Cloud Run target: where Pub/Sub is, and each operator's resources. */
  pubsub?: { connection: PubSubSettings; pairs: PubSubPair[] };
  /** Where they came from, for the person reading the output. */
  from: string;
  /** A local queue (crdfn dev, cluster up) rather than a deployment's. */
  local: boolean;
  /** SQS's client (absent on Pub/Sub). */
  sqs?: SQSClient;
  kubeconfig: string;
  /** The deploy settings' operators, when the queues came from them. */
  operators?: Operator<unknown>[];
}

const hint = "run `crdfn dev` or `crdfn cluster up` first, or name a deployment's settings with --settings crdfn.deploy.yaml";

async function fromSettings(file: string, shown: string): Promise<AdminTarget> {
  if (!existsSync(file)) throw new SetupError(`--settings ${shown}: no such file`);
  let raw: unknown;
  try {
    raw = parse(readFileSync(file, "utf8"));
  } catch (e) {
    throw new SetupError(`${shown}: not YAML: ${(e as Error).message.split("\n")[0]}`);
  }
  const s = parseQueueSettings(raw, shown);
  if (s.operators.length === 0) throw new SetupError(`${shown}: operators: lists no operator, so it names no queue`);
  const operators = await Promise.all(s.operators.map((o) => loadOperator(resolve(dirname(file), o.module))));
  if (s.target === "cloudrun") {
    // Google Cloud itself: application default credentials, in the settings' project.
    return {
      pairs: [],
      pubsub: {
        connection: { projectId: s.pubsub.project },
        pairs: operators.map((op) => ({ operator: operatorName(op), names: pubSubNamesOf(s.pubsub.project, s.pubsub.prefix, operatorName(op)) })),
      },
      from: shown,
      local: false,
      kubeconfig: defaultKubeconfig(),
      operators,
    };
  }
  // AWS itself: the SDK's own credential chain and endpoint settings, in the settings' region.
  const env = { ...process.env, AWS_REGION: s.queues.region };
  return {
    pairs: operators.map((op) => ({ operator: operatorName(op), events: eventQueueUrl(op, s), deadLetters: deadLetterQueueUrl(op, s) })),
    from: shown,
    local: false,
    sqs: sqsClient(sqsSettingsOf(env)),
    kubeconfig: defaultKubeconfig(),
    operators,
  };
}

export async function adminTarget(o: { stateDir: string; settings?: string }): Promise<AdminTarget> {
  if (o.settings) return fromSettings(resolve(o.settings), o.settings);
  const envFile = join(o.stateDir, "env");
  const fromFile = existsSync(envFile) ? readEnvFile(envFile) : {};
  const env = { ...fromFile, ...process.env };
  // `crdfn dev --target cloudrun`: the Pub/Sub emulator and each operator's resources.
  if (env.PUBSUB_EMULATOR_HOST && env.CRDFN_PUBSUB_OPERATORS) {
    const projectId = env.PUBSUB_PROJECT_ID ?? "crdfn-local";
    const prefix = env.CRDFN_PUBSUB_PREFIX ?? "crdfn-";
    return {
      pairs: [],
      pubsub: {
        connection: { projectId, emulatorHost: env.PUBSUB_EMULATOR_HOST },
        pairs: env.CRDFN_PUBSUB_OPERATORS.split(",")
          .filter(Boolean)
          .map((operator) => ({ operator, names: pubSubNamesOf(projectId, prefix, operator) })),
      },
      from: process.env.PUBSUB_EMULATOR_HOST ? "the environment" : envFile,
      local: true,
      kubeconfig: env.KUBECONFIG ?? defaultKubeconfig(),
    };
  }
  if (!env.CRDFN_QUEUE_URL && existsSync(DEFAULT_SETTINGS)) {
    console.error(`crdfn: queues from ./${DEFAULT_SETTINGS} (nothing local in ${envFile} or the environment; --settings names another)`);
    return fromSettings(resolve(DEFAULT_SETTINGS), DEFAULT_SETTINGS);
  }
  const need = (name: string): string => {
    const v = env[name];
    if (!v) throw new SetupError(`${name} is not set (${hint})`);
    return v;
  };
  return {
    pairs: [{ operator: "", events: need("CRDFN_QUEUE_URL"), deadLetters: need("CRDFN_DLQ_URL") }],
    from: process.env.CRDFN_QUEUE_URL ? "the environment" : envFile,
    local: true,
    sqs: sqsClient(sqsSettingsOf(env)),
    kubeconfig: need("KUBECONFIG"),
  };
}

const codeOf = (e: unknown): string | undefined => {
  const x = e as { code?: unknown; cause?: { code?: unknown }; name?: unknown };
  return [x.code, x.cause?.code].find((c): c is string => typeof c === "string");
};

/** An SQS request, its failure as one line naming the queue and where its URL came from. */
export async function onQueue<T>(t: AdminTarget, url: string, request: () => Promise<T>): Promise<T> {
  try {
    return await request();
  } catch (e) {
    const code = codeOf(e);
    const name = url.split("/").pop();
    if (code && /^(ECONNREFUSED|ENOTFOUND|ECONNRESET|EHOSTUNREACH|ETIMEDOUT)$/.test(code)) {
      const endpoint = new URL(url).origin;
      throw new SetupError(
        `cannot reach the queue ${name} at ${endpoint} (${code}; from ${t.from})${t.local ? ": is the crdfn dev or crdfn cluster up that wrote it still running?" : ""}`,
      );
    }
    const err = e as { name?: string; message?: string };
    throw new SetupError(`queue ${name} (from ${t.from}): ${err.name ?? "Error"}: ${(err.message ?? String(e)).split("\n")[0]}`);
  }
}

/** A Pub/Sub request, its failure as one line naming the resource and where its name came from. */
export async function onPubSub<T>(t: AdminTarget, name: string, request: () => Promise<T>): Promise<T> {
  try {
    return await request();
  } catch (e) {
    const code = (e as { code?: unknown }).code;
    const where = t.pubsub?.connection.emulatorHost ? `the Pub/Sub emulator at ${t.pubsub.connection.emulatorHost}` : "Pub/Sub";
    // gRPC UNAVAILABLE (14) or DEADLINE_EXCEEDED (4): nothing answers there.
    if (code === 14 || code === 4)
      throw new SetupError(
        `cannot reach ${where} for ${name.split("/").pop()} (from ${t.from})${t.local ? ": is the crdfn dev that wrote it still running?" : ""}`,
      );
    throw new SetupError(`${name.split("/").pop()} (from ${t.from}): ${((e as Error).message ?? String(e)).split("\n")[0]}`);
  }
}

/** A Kubernetes API failure as one line naming the server and the kubeconfig. */
export function kubeFailure(e: unknown, server: string | undefined, kubeconfig: string): SetupError {
  const code = codeOf(e);
  const why = code ?? (e instanceof Error ? e.message.split("\n")[0] : String(e));
  return new SetupError(`cannot reach the API server ${server ?? "?"} (kubeconfig ${kubeconfig}): ${why}`);
}
