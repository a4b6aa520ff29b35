// `npm run bench:queuedepth`: what one message costs the local SQS stand-in (ElasticMQ, as
// `crdfn dev` and the benchmarks run it) by the depth of its FIFO queue. N messages, each in a
// group of its own (one object's stream, as the bridge sends them), are sent in batches of ten,
// then received and deleted by four loops, as the local poller does; ElasticMQ's CPU seconds come
// from /proc. Every cold start at scale fills the queue this deep: the bridge sends every
// object's first event at once. SQS itself bills per request, whatever the depth. `--steady N`
// instead streams N messages through a queue kept shallow (200 sent and not yet deleted, as the
// bridge's start window keeps it) and prints the CPU per message of each 10,000: what a long
// cold start costs the stand-in as it goes on.
import type { SQSClient } from "@aws-sdk/client-sqs";
import { loadavg } from "node:os";
import { Command, InvalidArgumentError, Option } from "commander";
import { sqsClient } from "../clients/sqs-client.ts";
import { startLocalQueue } from "../emulator/queue.ts";
import { cpuSeconds, elasticMqPid } from "./proc.ts";
import { sendBatch, stream, takeBatch } from "./queue-stream.ts";

const STEADY_WINDOW = 200;
const STEADY_BLOCK = 10_000;

const program = new Command("bench:queuedepth")
  .description("ElasticMQ's CPU per message by the depth of its FIFO queue (one group per message, as the bridge sends)")
  .addOption(new Option("--depths <list>", "queue depths to measure, comma-separated").default("1000,2000,5000"))
  .addOption(new Option("--body-bytes <n>", "bytes per message body (a Greeting's event is about 1.5 KiB)").default("1500"))
  .addOption(
    new Option("--steady <n>", "instead: stream N messages at most 200 deep, CPU per message per 10,000").argParser((t) => {
      const n = Number(t);
      if (!Number.isInteger(n) || n < STEADY_BLOCK) throw new InvalidArgumentError(`--steady must be a whole number ≥ ${STEADY_BLOCK}`);
      return n;
    }),
  )
  .addOption(new Option("--jvm <options>", "JVM options added to ElasticMQ's, space-separated (e.g. -XX:TieredStopAtLevel=1)"))
  .addOption(new Option("--in-memory", "ElasticMQ without its H2 message store (as crdfn dev runs it: on disk)"))
  .addHelpText(
    "after",
    "\nExamples:\n  npm run bench:queuedepth -- --depths 1000,5000,10000\n  npm run bench:queuedepth -- --steady 60000 --jvm -XX:TieredStopAtLevel=1\n  npm run bench:queuedepth -- --steady 30000 --in-memory\n",
  );
const opts = program.parse().opts<{ depths: string; bodyBytes: string; steady?: number; jvm?: string; inMemory?: boolean }>();
const depths = opts.depths.split(",").map(Number);

async function fill(sqs: SQSClient, url: string, n: number, tag: string, body: string): Promise<void> {
  const batches: Promise<unknown>[] = [];
  for (let i = 0; i < n; i += 10) {
    batches.push(sendBatch(sqs, url, tag, i, Math.min(10, n - i), body));
    if (batches.length >= 8) await Promise.all(batches.splice(0));
  }
  await Promise.all(batches);
}

async function drain(sqs: SQSClient, url: string, n: number): Promise<void> {
  let received = 0;
  const loop = async (): Promise<void> => {
    while (received < n) {
      // Awaited first: `received += await …` would add to the count read before the wait,
      // dropping what the other loops took meanwhile.
      const took = await takeBatch(sqs, url);
      received += took;
    }
  };
  await Promise.all([loop(), loop(), loop(), loop()]);
}

/** Streams n messages at most STEADY_WINDOW deep, printing ElasticMQ's rate and CPU per message of each STEADY_BLOCK. */
async function steady(sqs: SQSClient, url: string, n: number, body: string, pid: number): Promise<void> {
  let mark = STEADY_BLOCK;
  let cpu = cpuSeconds(pid) ?? 0;
  let t = performance.now();
  await stream(sqs, url, n, {
    body,
    tag: "s",
    window: STEADY_WINDOW,
    onTaken: (done) => {
      while (done >= mark) {
        const c = cpuSeconds(pid) ?? 0;
        const now = performance.now();
        console.log(`| ${mark} | ${(STEADY_BLOCK / ((now - t) / 1000)).toFixed(0)} | ${(((c - cpu) * 1000) / STEADY_BLOCK).toFixed(2)} |`);
        cpu = c;
        t = now;
        mark += STEADY_BLOCK;
      }
    },
  });
}

const jvmArgs = opts.jvm?.split(" ").filter(Boolean) ?? [];
const storage = opts.inMemory ? "memory" : "disk";
const queue = await startLocalQueue({ log: () => {}, jvmArgs, storage });
try {
  const sqs = sqsClient({
    endpoint: queue.sqs.endpoint,
    region: queue.sqs.region,
    accessKeyId: queue.sqs.accessKeyId,
    secretAccessKey: queue.sqs.secretAccessKey,
  });
  const pid = elasticMqPid(Number(new URL(queue.sqs.endpoint).port));
  if (pid === undefined) throw new Error("the ElasticMQ process was not found");
  const body = "x".repeat(Number(opts.bodyBytes));
  const jvm = jvmArgs.length > 0 ? `, with ${jvmArgs.join(" ")}` : "";
  const kept = storage === "disk" ? "H2 storage, as crdfn runs it" : "messages in memory only";
  console.log(`bench:queuedepth — ElasticMQ (${kept}${jvm}); load average ${loadavg()[0]!.toFixed(1)} at start`);
  if (opts.steady !== undefined) {
    console.log(`| messages deleted | messages/s over the last ${STEADY_BLOCK} | CPU ms per message |`);
    console.log("|---|---|---|");
    await steady(sqs, queue.sqs.queues.fifo, opts.steady, body, pid);
  } else {
    console.log("| depth | send: s / CPU ms per message | receive + delete: s / CPU ms per message |");
    console.log("|---|---|---|");
    for (const n of depths) {
      const tag = `d${n}-${Date.now()}`;
      let cpu = cpuSeconds(pid) ?? 0;
      let t = performance.now();
      await fill(sqs, queue.sqs.queues.fifo, n, tag, body);
      const send = { s: (performance.now() - t) / 1000, ms: (((cpuSeconds(pid) ?? 0) - cpu) * 1000) / n };
      cpu = cpuSeconds(pid) ?? 0;
      t = performance.now();
      await drain(sqs, queue.sqs.queues.fifo, n);
      const take = { s: (performance.now() - t) / 1000, ms: (((cpuSeconds(pid) ?? 0) - cpu) * 1000) / n };
      console.log(`| ${n} | ${send.s.toFixed(1)} / ${send.ms.toFixed(2)} | ${take.s.toFixed(1)} / ${take.ms.toFixed(2)} |`);
    }
  }
  console.log(`load average ${loadavg()[0]!.toFixed(1)} at the end`);
} finally {
  await queue.stop();
}
