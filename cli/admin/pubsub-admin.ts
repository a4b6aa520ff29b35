// `crdfn status` and `crdfn dlq` on Pub/Sub: each operator's topic and push subscription, and the
// dead letters its dead-letter topic's pull subscription keeps. Against the emulator (a local
// `crdfn dev --target cloudrun`) or GCP (application default credentials). The client library is
// imported when a Pub/Sub command runs, not by every `crdfn` command.
import type { PubSub, protos } from "@google-cloud/pubsub";
import { pubSubClient, type PubSubSettings } from "../../clients/pubsub-client.ts";
import { messageGroupId, parseKeyEvent } from "../../core/event.ts";
import type { PubSubNames } from "../../deploy/queue-names.ts";

export interface DeadLetter {
  id: string;
  body: string;
  orderingKey: string;
  publishTime: Date;
  attributes: Record<string, string>;
}

export interface PubSubAdmin {
  /** The subscription's settings as Pub/Sub has them; undefined when it does not exist. */
  subscription(name: string): Promise<protos.google.pubsub.v1.ISubscription | undefined>;
  topicExists(name: string): Promise<boolean>;
  /** Up to `max` dead letters, left where they are (their lease handed back at once). */
  peek(deadLetterSubscription: string, max: number): Promise<DeadLetter[]>;
  /**
   * Moves every dead letter back to the operator's topic, into its object's ordering key (the
   * message's own, or the one its key event names): a copy is published before the dead letter
   * is acknowledged, so a failure duplicates, never loses.
   */
  redrive(names: Pick<PubSubNames, "topic" | "deadLetterSubscription">, max: number): Promise<{ count: number; byKind: Map<string, number> }>;
  /**
   * The dead letter with this message id, leased (others pulled on the way are handed back):
   * `remove` acknowledges it, `release` hands it back. undefined when it is not there.
   */
  hold(deadLetterSubscription: string, id: string): Promise<(DeadLetter & { remove: () => Promise<void>; release: () => Promise<void> }) | undefined>;
  close(): Promise<void>;
}

const NOT_FOUND = 5;

/** A pulled message as a dead letter. */
function letterOf(received: protos.google.pubsub.v1.IReceivedMessage): DeadLetter {
  const m = received.message ?? {};
  const seconds = Number(String(m.publishTime?.seconds ?? 0));
  return {
    id: m.messageId ?? "",
    body: Buffer.from(m.data ?? new Uint8Array()).toString("utf8"),
    orderingKey: m.orderingKey ?? "",
    publishTime: new Date(seconds * 1000 + Math.floor((m.publishTime?.nanos ?? 0) / 1e6)),
    attributes: { ...(m.attributes ?? {}) },
  };
}

export async function pubSubAdmin(c: PubSubSettings): Promise<PubSubAdmin> {
  const { v1 } = await import("@google-cloud/pubsub");
  const pubsub: PubSub = await pubSubClient(c);
  const subscriber = new v1.SubscriberClient({ ...(await pubsub.getClientConfig()) });
  const notFound = (e: unknown): boolean => (e as { code?: unknown }).code === NOT_FOUND;

  const pull = async (subscription: string, max: number) => {
    const [res] = await subscriber.pull({ subscription, maxMessages: Math.min(max, 100), returnImmediately: true }, { timeout: 30_000 });
    return res.receivedMessages ?? [];
  };

  return {
    async subscription(name) {
      try {
        const [meta] = await subscriber.getSubscription({ subscription: name });
        return meta;
      } catch (e) {
        if (notFound(e)) return undefined;
        throw e;
      }
    },
    async topicExists(name) {
      const [exists] = await pubsub.topic(name).exists();
      return exists;
    },
    async peek(subscription, max) {
      const got: DeadLetter[] = [];
      const ackIds: string[] = [];
      // One pass: what is outstanding from it is not handed out again until released below.
      for (;;) {
        const batch = await pull(subscription, max - got.length);
        if (batch.length === 0) break;
        for (const rm of batch) {
          got.push(letterOf(rm));
          ackIds.push(rm.ackId ?? "");
        }
        if (got.length >= max) break;
      }
      if (ackIds.length > 0) await subscriber.modifyAckDeadline({ subscription, ackIds, ackDeadlineSeconds: 0 });
      return got.sort((a, b) => a.publishTime.getTime() - b.publishTime.getTime());
    },
    async redrive(names, max) {
      const topic = pubsub.topic(names.topic, { messageOrdering: true, batching: { maxMessages: 1, maxMilliseconds: 0 } });
      const byKind = new Map<string, number>();
      let count = 0;
      while (count < max) {
        const batch = await pull(names.deadLetterSubscription, max - count);
        if (batch.length === 0) break;
        for (const rm of batch) {
          const letter = letterOf(rm);
          const parsed = parseKeyEvent(letter.body);
          // A dead letter may have lost its ordering key on the way; its key event names its object.
          const orderingKey = letter.orderingKey || (parsed.ok ? messageGroupId(parsed.event) : "");
          const attributes = Object.fromEntries(Object.entries(letter.attributes).filter(([k]) => !k.startsWith("CloudPubSubDeadLetter")));
          await topic.publishMessage({ data: Buffer.from(letter.body, "utf8"), attributes, ...(orderingKey ? { orderingKey } : {}) });
          await subscriber.acknowledge({ subscription: names.deadLetterSubscription, ackIds: [rm.ackId ?? ""] });
          const kind = parsed.ok ? parsed.event.kind : "malformed";
          byKind.set(kind, (byKind.get(kind) ?? 0) + 1);
          count++;
        }
      }
      await topic.flush();
      return { count, byKind };
    },
    async hold(subscription, id) {
      const passed: string[] = [];
      let found: protos.google.pubsub.v1.IReceivedMessage | undefined;
      try {
        while (found === undefined) {
          const batch = await pull(subscription, 100);
          if (batch.length === 0) break;
          for (const rm of batch) {
            if (found === undefined && rm.message?.messageId === id) found = rm;
            else passed.push(rm.ackId ?? "");
          }
        }
      } finally {
        if (passed.length > 0) await subscriber.modifyAckDeadline({ subscription, ackIds: passed, ackDeadlineSeconds: 0 });
      }
      if (found === undefined) return undefined;
      const ackIds = [found.ackId ?? ""];
      // Leased for as long as a person steps through the reconcile in a debugger.
      await subscriber.modifyAckDeadline({ subscription, ackIds, ackDeadlineSeconds: 600 });
      return {
        ...letterOf(found),
        remove: async () => void (await subscriber.acknowledge({ subscription, ackIds })),
        release: async () => void (await subscriber.modifyAckDeadline({ subscription, ackIds, ackDeadlineSeconds: 0 })),
      };
    },
    async close() {
      await subscriber.close();
      await pubsub.close();
    },
  };
}
