// Publishes key events to a Pub/Sub topic with an ordering key per object (the GCP side of
// the FIFO group): the transport behind the bridge's coalescing publisher on GCP.
//
// Shape: `publish(entries)` sends one batch and resolves, never rejects, with one outcome per
// entry, in entry order. Entries of one ordering key reach the topic in entry order (the client
// library sends a key's messages one request at a time, in order). When a publish fails, the
// library fails every message of that key queued behind it and documents the key as paused
// until `resumePublishing(key)` (6.3.0 in fact drops the failed key's queue once it is empty,
// so the next publish starts afresh; a later release may keep it paused). This transport
// resumes each failed key before it reports, so the caller's retry goes through either way.
// The caller must retry a failed entry before it publishes anything newer for that key, or the
// newer one could overtake it (the coalescing publisher does: an object is never in flight
// twice, and a failed batch goes back into its buffer).
//
// @google-cloud/pubsub (gRPC, protobufs: tens of MB) is imported on the first publish, so a
// bridge on SQS never loads it.
import type { PubSub, Topic } from "@google-cloud/pubsub";
import { z } from "zod";

export interface PubSubEntry {
  /** The message data (a key event's JSON), sent as UTF-8. */
  body: string;
  /** The object's stream (core/event.ts messageGroupId); "" publishes unordered. */
  orderingKey: string;
  attributes?: Record<string, string>;
}

export type PubSubOutcome =
  | { ok: true; messageId: string }
  /** `code`: the gRPC status when the server answered (5 NOT_FOUND: no such topic; 7: no permission). */
  | { ok: false; error: string; code?: number };

export interface PubSubTransport {
  publish(entries: readonly PubSubEntry[]): Promise<PubSubOutcome[]>;
  /** Sends what is still batched and closes the connection. */
  close(): Promise<void>;
}

export const PubSubTransportOptions = z.object({
  topic: z.string().regex(/^projects\/[^/]+\/topics\/[^/]+$/, "a full topic name, projects/<project>/topics/<topic>"),
  /** host:port of an emulator. Default: PUBSUB_EMULATOR_HOST when set, else Google's endpoint (with application default credentials). */
  apiEndpoint: z.string().min(1).optional(),
  /** Bound on one publish, retries of transient errors included (the library's default is 10 minutes). */
  timeoutMs: z.number().int().positive().default(60_000),
});
export type PubSubTransportOptions = z.input<typeof PubSubTransportOptions>;

export function pubSubTransport(options: PubSubTransportOptions): PubSubTransport {
  const parsed = PubSubTransportOptions.safeParse(options);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new Error(`Pub/Sub transport: ${issue.path.join(".") || "options"}: ${issue.message}`);
  }
  const o = parsed.data;
  const projectId = o.topic.split("/")[1]!;
  let client: PubSub | undefined;
  let topic: Promise<Topic> | undefined;
  const load = (): Promise<Topic> =>
    (topic ??= import("@google-cloud/pubsub").then(({ PubSub }) => {
      // At an emulator, naming the universe spares google-gax a credentials lookup it makes anyway.
      const endpoint = o.apiEndpoint ? { apiEndpoint: o.apiEndpoint, clientOptions: { universeDomain: "googleapis.com" } } : {};
      client = new PubSub({ projectId, ...endpoint });
      return client.topic(o.topic, {
        messageOrdering: true,
        // One call's entries leave together: a request per ordering key (Pub/Sub takes one key per request).
        batching: { maxMessages: 1000, maxMilliseconds: 1 },
        gaxOpts: { timeout: o.timeoutMs },
      });
    }));

  return {
    async publish(entries) {
      const t = await load();
      // publishMessage throws synchronously on bad input: the async wrapper makes that a rejection.
      const settled = await Promise.allSettled(
        entries.map(async (e) => t.publishMessage({ data: Buffer.from(e.body, "utf8"), orderingKey: e.orderingKey, attributes: e.attributes ?? {} })),
      );
      const failedKeys = new Set<string>();
      const outcomes = settled.map((s, i): PubSubOutcome => {
        if (s.status === "fulfilled") return { ok: true, messageId: s.value };
        const key = entries[i]!.orderingKey;
        if (key) failedKeys.add(key);
        const code = (s.reason as { code?: unknown }).code;
        return { ok: false, error: (s.reason as Error).message ?? String(s.reason), ...(typeof code === "number" ? { code } : {}) };
      });
      for (const key of failedKeys) t.resumePublishing(key);
      return outcomes;
    },
    async close() {
      if (!topic) return;
      const t = await topic;
      await t.flush().catch(() => undefined);
      await client?.close();
    },
  };
}
