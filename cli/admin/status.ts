// `crdfn status`: is the pipeline keeping up, and how did the latest reconciles end?
// Queue figures come from SQS, for every operator's event and dead-letter queue (or on the Cloud
// Run target from Pub/Sub: each topic, push subscription and its dead letters); outcomes come
// from the objects themselves (their Ready condition and observedGeneration), which is where a
// level-triggered operator records them.
import { existsSync } from "node:fs";
import { GetQueueAttributesCommand, ReceiveMessageCommand, type SQSClient } from "@aws-sdk/client-sqs";
import { ApiException, CustomObjectsApi, KubeConfig } from "@kubernetes/client-node";
import { Command } from "commander";
import type { Operator } from "../../core/operator.ts";
import { SetupError } from "../../emulator/errors.ts";
import { adminTarget, kubeFailure, onPubSub, onQueue, type AdminTarget } from "./admin-target.ts";
import { describeLetter, describeMessage } from "./dlq.ts";
import { pubSubAdmin } from "./pubsub-admin.ts";
import { DEFAULT_SETTINGS, projectOperators, selectOperators } from "../operators.ts";
import { unservedReport } from "../unserved.ts";
import { KubeHttp } from "../../clients/kube-http.ts";

interface Depth {
  visible: number;
  inFlight: number;
  delayed: number;
}

async function depth(sqs: SQSClient, url: string): Promise<Depth> {
  const a =
    (
      await sqs.send(
        new GetQueueAttributesCommand({
          QueueUrl: url,
          AttributeNames: ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible", "ApproximateNumberOfMessagesDelayed"],
        }),
      )
    ).Attributes ?? {};
  return {
    visible: Number(a.ApproximateNumberOfMessages ?? 0),
    inFlight: Number(a.ApproximateNumberOfMessagesNotVisible ?? 0),
    delayed: Number(a.ApproximateNumberOfMessagesDelayed ?? 0),
  };
}

/** Age of the oldest dead letter. Peeking is harmless there: nothing redrives a DLQ by itself. */
async function oldestDeadLetter(sqs: SQSClient, url: string): Promise<string> {
  const out = await sqs.send(
    new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: 10, VisibilityTimeout: 0, MessageSystemAttributeNames: ["SentTimestamp"] }),
  );
  if (!out.Messages?.length) return "-";
  return describeMessage(out.Messages.reduce((a, b) => (Number(a.Attributes?.SentTimestamp) <= Number(b.Attributes?.SentTimestamp) ? a : b)));
}

interface Row {
  object: string;
  ready: string;
  reason: string;
  synced: string;
  since: string;
}

async function outcomes(kc: KubeConfig, kubeconfig: string, ops: ReadonlyArray<Operator<unknown>>, limit: number): Promise<Row[]> {
  const api = kc.makeApiClient(CustomObjectsApi);
  const rows: Array<Row & { at: number }> = [];
  for (const op of ops) {
    const { group, version, plural, kind } = op.resource;
    const list = (await api.listClusterCustomObject({ group, version, plural }).catch((e: unknown) => {
      // Not installed (yet): nothing to show for it. Anything else is one line, not a stack.
      if (e instanceof ApiException && e.code === 404) return { items: [] };
      throw kubeFailure(e, kc.getCurrentCluster()?.server, kubeconfig);
    })) as {
      items: Array<{
        metadata: { name: string; namespace?: string; generation?: number };
        status?: { observedGeneration?: number; conditions?: Array<{ type: string; status: string; reason?: string; lastTransitionTime?: string }> };
      }>;
    };
    for (const o of list.items) {
      const ready = o.status?.conditions?.find((c) => c.type === "Ready");
      const at = Date.parse(ready?.lastTransitionTime ?? "") || 0;
      rows.push({
        object: `${kind} ${o.metadata.namespace ? `${o.metadata.namespace}/` : ""}${o.metadata.name}`,
        ready: ready?.status ?? "Unknown",
        reason: ready?.reason ?? "not reconciled yet",
        synced: o.status?.observedGeneration === o.metadata.generation ? "yes" : `no (${o.status?.observedGeneration ?? "-"}/${o.metadata.generation})`,
        since: at ? new Date(at).toISOString() : "-",
        at,
      });
    }
  }
  return rows.sort((a, b) => b.at - a.at).slice(0, limit);
}

function table(rows: Array<Record<string, string>>): string {
  if (rows.length === 0) return "  (none)";
  const keys = Object.keys(rows[0]!);
  const width = keys.map((k) => Math.max(k.length, ...rows.map((r) => (r[k] ?? "").length)));
  const line = (cells: string[]) => ("  " + cells.map((c, i) => c.padEnd(width[i]!)).join("  ")).trimEnd();
  return [line(keys.map((k) => k.toUpperCase())), ...rows.map((r) => line(keys.map((k) => r[k] ?? "")))].join("\n");
}

/** At most this many dead letters are counted (they are pulled and handed back to be counted). */
const DEAD_LETTER_COUNT_LIMIT = 1000;

async function pubSubReport(t: AdminTarget): Promise<void> {
  const p = t.pubsub!;
  const admin = await pubSubAdmin(p.connection);
  const rows: Array<Record<string, string>> = [];
  const oldest: string[] = [];
  try {
    for (const { operator, names } of p.pairs) {
      const sub = await onPubSub(t, names.subscription, () => admin.subscription(names.subscription));
      const seconds = (d: { seconds?: { toString(): string } | null } | null | undefined) => `${Number(d?.seconds?.toString() ?? 0)}s`;
      const letters = await onPubSub(t, names.deadLetterSubscription, () => admin.peek(names.deadLetterSubscription, DEAD_LETTER_COUNT_LIMIT));
      rows.push({
        operator,
        topic: names.topic.split("/").pop() ?? names.topic,
        subscription: sub ? "push" : "missing",
        ordered: sub?.enableMessageOrdering ? "yes" : "no",
        "dead letter after": sub?.deadLetterPolicy?.maxDeliveryAttempts ? `${sub.deadLetterPolicy.maxDeliveryAttempts} deliveries` : "-",
        backoff: sub?.retryPolicy ? `${seconds(sub.retryPolicy.minimumBackoff)}–${seconds(sub.retryPolicy.maximumBackoff)}` : "-",
        "dead letters": letters.length >= DEAD_LETTER_COUNT_LIMIT ? `≥${DEAD_LETTER_COUNT_LIMIT}` : String(letters.length),
      });
      const first = letters[0];
      oldest.push(`${operator}  ${first ? describeLetter(first.id, first.body, first.publishTime.getTime()) : "-"}`);
    }
  } finally {
    await admin.close();
  }
  console.log(
    `Topics and subscriptions (from ${t.from}${p.connection.emulatorHost ? `, the Pub/Sub emulator at ${p.connection.emulatorHost}` : `, project ${p.connection.projectId}`})\n${table(rows)}`,
  );
  console.log(
    `  (a push subscription's backlog is Cloud Monitoring's pubsub.googleapis.com/subscription/num_undelivered_messages; Pub/Sub's API does not report it)`,
  );
  console.log(`Oldest dead letter\n${oldest.map((l) => `  ${l}`).join("\n")}`);
}

async function queueReport(t: AdminTarget): Promise<void> {
  if (t.pubsub) return pubSubReport(t);
  const sqs = t.sqs!;
  const rows: Array<Record<string, string>> = [];
  const oldest: string[] = [];
  for (const pair of t.pairs) {
    const label = (what: string) => `${pair.operator ? `${pair.operator} ` : ""}${what} (FIFO)`;
    for (const [what, url] of [
      ["events", pair.events],
      ["dead letters", pair.deadLetters],
    ] as const) {
      const d = await onQueue(t, url, () => depth(sqs, url));
      rows.push({
        queue: label(what),
        visible: String(d.visible),
        "in flight": String(d.inFlight),
        delayed: String(d.delayed),
        name: url.split("/").pop() ?? url,
      });
    }
    const dead = await onQueue(t, pair.deadLetters, () => oldestDeadLetter(sqs, pair.deadLetters));
    oldest.push(pair.operator ? `${pair.operator}  ${dead}` : dead);
  }
  console.log(`Queues (from ${t.from})\n${table(rows)}`);
  console.log(`Oldest dead letter\n${oldest.map((l) => `  ${l}`).join("\n")}`);
}

/**
 * Without --operator or a deployment's settings: the operators ./crdfn.deploy.yaml lists (a
 * project `crdfn init` made, while `crdfn dev` runs), saying so, else the examples of a checkout.
 */
export function statusCommand(): Command {
  return new Command("status")
    .description("every operator's queue and dead-letter depth, the oldest dead letter, and the latest reconcile outcomes recorded on the objects")
    .option("--state-dir <dir>", "where crdfn dev wrote env", ".crdfn")
    .option("--settings <file>", "a deployment's deploy settings: its operators' queues (AWS credentials from the environment) and KUBECONFIG's cluster")
    .option("--limit <n>", "outcomes to show", (v) => Number(v), 20)
    .option(
      "--operator <file...>",
      "your operator module(s) (default: the settings' operators, else those ./crdfn.deploy.yaml lists, else the examples of a crdfn checkout)",
    )
    .addHelpText(
      "after",
      "\nExamples:\n  $ crdfn status                         # while crdfn dev runs\n  $ crdfn status --operator operator.ts --limit 5\n  $ crdfn status --settings crdfn.deploy.yaml   # a deployment",
    )
    .action(async (o: { stateDir: string; settings?: string; limit: number; operator?: string[] }) => {
      const t = await adminTarget(o);
      try {
        await queueReport(t);
      } finally {
        t.sqs?.destroy();
      }
      if (!existsSync(t.kubeconfig)) throw new SetupError(`no kubeconfig at ${t.kubeconfig} (set KUBECONFIG)`);
      const kc = new KubeConfig();
      kc.loadFromFile(t.kubeconfig);
      const operators = o.operator?.length ? await selectOperators(o.operator, false) : (t.operators ?? (await projectOperators(DEFAULT_SETTINGS)));
      const rows = await outcomes(kc, t.kubeconfig, operators, o.limit);
      console.log(
        `Latest reconcile outcomes (from each object's Ready condition)\n${table(rows.map(({ object, ready, reason, synced, since }) => ({ object, ready, reason, synced, since })))}`,
      );
      console.log(await unservedReport(new KubeHttp({ connection: kc }), operators));
    });
}
