// `crdfn status`: is the pipeline keeping up, and how did the latest reconciles end?
// Queue figures come from SQS; outcomes come from the objects themselves (their Ready
// condition and observedGeneration), which is where a level-triggered operator records them.
import { GetQueueAttributesCommand, ReceiveMessageCommand, type SQSClient } from "@aws-sdk/client-sqs";
import { CustomObjectsApi, KubeConfig } from "@kubernetes/client-node";
import { Command } from "commander";
import type { Operator } from "../core/operator.ts";
import { describeMessage } from "./dlq.ts";
import { selectOperators } from "./operators.ts";
import { adminEnv, required, sqsFrom } from "./settings.ts";

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

async function outcomes(kc: KubeConfig, ops: ReadonlyArray<Operator<unknown>>, limit: number): Promise<Row[]> {
  const api = kc.makeApiClient(CustomObjectsApi);
  const rows: Array<Row & { at: number }> = [];
  for (const op of ops) {
    const { group, version, plural, kind } = op.resource;
    const list = (await api.listClusterCustomObject({ group, version, plural }).catch(() => ({ items: [] }))) as {
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
  const line = (cells: string[]) => "  " + cells.map((c, i) => c.padEnd(width[i]!)).join("  ");
  return [line(keys.map((k) => k.toUpperCase())), ...rows.map((r) => line(keys.map((k) => r[k] ?? "")))].join("\n");
}

export function statusCommand(): Command {
  return new Command("status")
    .description("queue and dead-letter depth, oldest dead letter, and the latest reconcile outcomes recorded on the objects")
    .option("--state-dir <dir>", "where crdfn dev wrote env", ".crdfn")
    .option("--limit <n>", "outcomes to show", (v) => Number(v), 20)
    .option("--operator <file...>", "your operator module(s) (default: the examples of a crdfn checkout)")
    .addHelpText("after", "\nExamples:\n  $ crdfn status                         # while crdfn dev runs\n  $ crdfn status --operator operator.ts --limit 5")
    .action(async (o: { stateDir: string; limit: number; operator?: string[] }) => {
      const env = adminEnv(o.stateDir);
      const hint = "run `crdfn dev` or `crdfn cluster up` first, or export it";
      const queues: Array<[string, string | undefined]> = [
        ["events (FIFO)", required(env, "CRDFN_QUEUE_URL", hint)],
        ["dead letters (FIFO)", env.CRDFN_DLQ_URL],
        ["requeues (standard)", env.CRDFN_STANDARD_QUEUE_URL],
        ["dead letters (standard)", env.CRDFN_STANDARD_DLQ_URL],
      ];
      const sqs = sqsFrom(env);
      try {
        const rows: Array<Record<string, string>> = [];
        for (const [name, url] of queues) {
          if (!url) continue;
          const d = await depth(sqs, url);
          rows.push({ queue: name, visible: String(d.visible), "in flight": String(d.inFlight), delayed: String(d.delayed) });
        }
        console.log(`Queues\n${table(rows)}`);
        if (env.CRDFN_DLQ_URL) console.log(`Oldest dead letter\n  ${await oldestDeadLetter(sqs, env.CRDFN_DLQ_URL)}`);
      } finally {
        sqs.destroy();
      }
      const kc = new KubeConfig();
      kc.loadFromFile(required(env, "KUBECONFIG", hint));
      const rows = await outcomes(kc, await selectOperators(o.operator, false), o.limit);
      console.log(`Latest reconcile outcomes (from each object's Ready condition)\n${table(rows.map(({ object, ready, reason, synced, since }) => ({ object, ready, reason, synced, since })))}`);
    });
}
