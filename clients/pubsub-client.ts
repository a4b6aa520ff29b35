// Every Pub/Sub client crdfn builds (the bridge's publisher, a function's re-send, the CLI's
// dead-letter commands, the local environment's and the tests'). The library (gRPC, protobufs)
// is imported on the first call, never at a module's load: nothing on AWS loads it, and on GCP
// the bridge and the functions load it on their first publish.
import type { PubSub } from "@google-cloud/pubsub";

export interface PubSubSettings {
  /** The project of the topics and subscriptions the client names. */
  projectId: string;
  /** host:port of an emulator; unset: Google's endpoint with application default credentials (or PUBSUB_EMULATOR_HOST, which the library reads itself). */
  emulatorHost?: string;
}

export async function pubSubClient(settings: PubSubSettings): Promise<PubSub> {
  const { PubSub } = await import("@google-cloud/pubsub");
  // At an emulator, naming the universe spares google-gax a credentials lookup (and a
  // metadata-server probe) that it makes for every stub even when the endpoint is an emulator.
  const emulator = settings.emulatorHost ? { apiEndpoint: settings.emulatorHost, emulatorMode: true, clientOptions: { universeDomain: "googleapis.com" } } : {};
  return new PubSub({ projectId: settings.projectId, ...emulator });
}

/** The project of a full topic name, projects/<project>/topics/<topic>. */
export const projectOfTopic = (topic: string): string => topic.split("/")[1] ?? "";
