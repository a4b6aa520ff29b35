// A function's one publish: a message deferred through an API server outage, re-sent into its
// own ordering key on its own topic so its delivery count starts again (settle.ts "resend").
// The function's service account holds roles/pubsub.publisher on that topic alone
// (deploy/gcp.ts). @google-cloud/pubsub is imported on the first re-send only (clients/pubsub-client.ts): a normal
// delivery publishes nothing, and the library would weigh on every cold start.
import type { PubSub, Topic } from "@google-cloud/pubsub";
import { projectOfTopic, pubSubClient } from "../../clients/pubsub-client.ts";

export interface Republish {
  (m: { body: string; orderingKey?: string; attributes: Record<string, string> }): Promise<void>;
  close(): Promise<void>;
}

export function pubSubRepublisher(target: { topic: string; emulatorHost?: string }): Republish {
  let client: PubSub | undefined;
  let topic: Promise<Topic> | undefined;
  const load = (): Promise<Topic> =>
    (topic ??= pubSubClient({ projectId: projectOfTopic(target.topic), ...(target.emulatorHost ? { emulatorHost: target.emulatorHost } : {}) }).then(
      (built) => {
        client = built;
        return built.topic(target.topic, { messageOrdering: true, batching: { maxMessages: 1, maxMilliseconds: 0 } });
      },
    ));
  const republish = async (m: Parameters<Republish>[0]): Promise<void> => {
    const t = await load();
    try {
      await t.publishMessage({ data: Buffer.from(m.body, "utf8"), attributes: m.attributes, ...(m.orderingKey ? { orderingKey: m.orderingKey } : {}) });
    } catch (e) {
      // The library pauses a key whose publish failed; the caller's next attempt must go through.
      if (m.orderingKey) t.resumePublishing(m.orderingKey);
      throw e;
    }
  };
  return Object.assign(republish, {
    async close() {
      if (!topic) return;
      await (await topic).flush().catch(() => undefined);
      await client?.close();
    },
  });
}
