// Publishes key events to Pub/Sub topics with an ordering key per object (the GCP side of the
// FIFO group): the transport behind the bridge's coalescing publisher on GCP (publisher.ts).
//
// Shape: `publish(topic, entries)` sends one batch and resolves, never rejects, with one outcome
// per entry, in entry order. Entries of one ordering key reach the topic in entry order (the
// client library sends a key's messages one request at a time, in order). When a publish fails,
// the library fails every message of that key queued behind it and documents the key as paused
// until `resumePublishing(key)` (6.3.0 in fact drops the failed key's queue once it is empty,
// so the next publish starts afresh; a later release may keep it paused). This transport
// resumes each failed key before it reports, so the caller's retry goes through either way.
// The caller must retry a failed entry before it publishes anything newer for that key, or the
// newer one could overtake it (the coalescing publisher does: an object is never in flight
// twice, and a failed batch goes back into its buffer).
//
// Pub/Sub has no deduplication: the bridge's deduplication id travels as an attribute, and a
// repeated announcement costs a level-triggered reconcile that finds nothing to do.
//
// @google-cloud/pubsub (gRPC, protobufs: tens of MB) is imported on the first publish, so a
// bridge on SQS never loads it.
import type { PubSub, Topic } from "@google-cloud/pubsub";
import { z } from "zod";
import { zodLine } from "../core/config-error.ts";
import { projectOfTopic, pubSubClient } from "../clients/pubsub-client.ts";
import { TransportError, type QueueTransport } from "./transport.ts";

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

export interface PubSubPublisher {
  publish(topic: string, entries: readonly PubSubEntry[]): Promise<PubSubOutcome[]>;
  /** true, false (NOT_FOUND), or undefined when it cannot tell (no permission to look, unreachable). */
  topicExists(topic: string): Promise<boolean | undefined>;
  /** Sends what is still batched and closes the connection. */
  close(): Promise<void>;
}

/** projects/<project>/topics/<topic>, as every setting that names a topic spells it. */
export const topicNameSchema = z
  .string()
  .regex(
    /^projects\/[a-z][-a-z0-9.:]{4,61}[a-z0-9]\/topics\/[A-Za-z][A-Za-z0-9._~+%-]{2,254}$/,
    "must be a full topic name, projects/<project>/topics/<topic>",
  );

export const PubSubPublisherOptions = z.object({
  /** host:port of an emulator. Default: PUBSUB_EMULATOR_HOST when set, else Google's endpoint (with application default credentials). */
  apiEndpoint: z.string().min(1).optional(),
  /** Bound on one publish, retries of transient errors included (the library's default is 10 minutes). */
  timeoutMs: z.number().int().positive().default(60_000),
});
export type PubSubPublisherOptions = z.input<typeof PubSubPublisherOptions>;

const NOT_FOUND = 5;
const PERMISSION_DENIED = 7;
const GRPC_NAMES: Record<number, string> = {
  4: "DEADLINE_EXCEEDED",
  5: "NOT_FOUND",
  7: "PERMISSION_DENIED",
  8: "RESOURCE_EXHAUSTED",
  14: "UNAVAILABLE",
  16: "UNAUTHENTICATED",
};

export function pubSubPublisher(options: PubSubPublisherOptions = {}): PubSubPublisher {
  const parsed = PubSubPublisherOptions.safeParse(options);
  if (!parsed.success) throw new Error(`Pub/Sub publisher: ${zodLine(parsed.error, { first: true, root: "options" })}`);
  const o = parsed.data;
  let client: Promise<PubSub> | undefined;
  const topics = new Map<string, Promise<Topic>>();
  const clientFor = (projectId: string): Promise<PubSub> => (client ??= pubSubClient({ projectId, ...(o.apiEndpoint ? { emulatorHost: o.apiEndpoint } : {}) }));
  const topicOf = (name: string): Promise<Topic> => {
    let t = topics.get(name);
    if (!t) {
      t = clientFor(projectOfTopic(name)).then((c) =>
        c.topic(name, {
          messageOrdering: true,
          // One call's entries leave together: a request per ordering key (Pub/Sub takes one key per request).
          batching: { maxMessages: 1000, maxMilliseconds: 1 },
          gaxOpts: { timeout: o.timeoutMs },
        }),
      );
      topics.set(name, t);
    }
    return t;
  };

  return {
    async publish(topic, entries) {
      const t = await topicOf(topic);
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
    async topicExists(topic) {
      try {
        await (await topicOf(topic)).getMetadata({ timeout: 10_000 });
        return true;
      } catch (e) {
        const code = (e as { code?: unknown }).code;
        if (code === NOT_FOUND) return false;
        if (code === PERMISSION_DENIED) return undefined;
        return undefined;
      }
    },
    async close() {
      for (const t of topics.values()) await (await t).flush().catch(() => undefined);
      await (await client)?.close();
    },
  };
}

/**
 * The bridge's transport over a Pub/Sub publisher: destinations are full topic names, streams
 * are ordering keys, the cluster and the deduplication id are attributes. A batch every entry of
 * which failed alike (the topic missing, the service unreachable) is a failed request.
 */
export function pubSubTransport(publisher: PubSubPublisher): QueueTransport {
  return {
    noun: "topic",
    // The library splits a batch into a request per ordering key; 100 bounds what one batch holds back.
    maxBatch: 100,
    // The client sends one Publish per ordering key, and a batch holds each object once: waiting fills nothing.
    lingerMs: 0,
    async send(topic, messages) {
      const outcomes = await publisher.publish(
        topic,
        messages.map((m) => ({ body: m.body, orderingKey: m.stream, attributes: { "crdfn-cluster": m.cluster, "crdfn-dedup": m.deduplicationId } })),
      );
      const failed = outcomes.filter((x) => !x.ok);
      if (failed.length === outcomes.length && failed.length > 0 && failed.every((f) => f.code === failed[0]!.code)) {
        const code = failed[0]!.code;
        throw new TransportError(failed[0]!.error.split("\n")[0] ?? "publish failed", {
          reason: code === undefined ? "error" : (GRPC_NAMES[code] ?? `grpc-${code}`),
          ...(code === undefined ? {} : { status: code }),
          missing: code === NOT_FOUND,
        });
      }
      return outcomes.map((x) =>
        x.ok
          ? { ok: true }
          : { ok: false, reason: x.code === undefined ? x.error.slice(0, 60) : (GRPC_NAMES[x.code] ?? `grpc-${x.code}`), missing: x.code === NOT_FOUND },
      );
    },
    exists: (topic) => publisher.topicExists(topic),
    close: () => publisher.close(),
  };
}
