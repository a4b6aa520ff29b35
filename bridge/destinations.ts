// Where events go — the bridge's queue (or topic), or a watched resource's own — and whether each
// destination exists: one that does not is a setting a person must fix (problems.ts), named by the
// setting that gives it.
import type { KeyEvent } from "../core/event.ts";
import type { BridgeConfig } from "./config.ts";
import type { Problems } from "./problems.ts";
import { resourceLabel } from "./resource-readiness.ts";
import type { QueueTransport } from "./transport.ts";

/** Each watched resource's events go to its own queue (or topic) when it names one, else to the bridge's. */
export function queueRouter(config: BridgeConfig): (event: KeyEvent) => string {
  const fallback = defaultDestination(config);
  const routes = new Map(config.resources.map((r) => [`${r.group}/${r.plural}`, r.topic ?? r.queueUrl ?? fallback]));
  return (event) => routes.get(`${event.group}/${event.plural}`) ?? fallback;
}

/** The bridge's own queue URL or topic (the config's refinement allows exactly one). */
const defaultDestination = (config: BridgeConfig): string => config.queue.topic ?? config.queue.url ?? "";

/** Each destination the bridge sends to, and the setting that names it. */
export function destinationSettings(config: BridgeConfig, transport: QueueTransport): Map<string, string> {
  const settings = new Map<string, string>([[defaultDestination(config), config.queue.topic !== undefined ? "CRDFN_PUBSUB_TOPIC" : "CRDFN_QUEUE_URL"]]);
  for (const r of config.resources) {
    const own = r.topic ?? r.queueUrl;
    if (own !== undefined) settings.set(own, `the ${transport.noun} of ${resourceLabel(r)} (CRDFN_RESOURCES @${transport.noun === "topic" ? "topic" : "url"})`);
  }
  return settings;
}

/** The problem's key for a destination, and its line when it is missing. */
export const missingKey = (transport: QueueTransport, destination: string): string => `${transport.noun} ${destination}`;
export const missingLine = (settings: Map<string, string>, transport: QueueTransport, destination: string): string =>
  `${settings.get(destination) ?? transport.noun}: the ${transport.noun} ${destination} does not exist`;

/**
 * A queue (or topic) that does not exist is a setting a person must fix: said once, naming the
 * setting, and the bridge is not ready until it exists (checked again every 10 s). Other errors
 * are outages the publisher rides out.
 */
export async function checkQueues(settings: Map<string, string>, transport: QueueTransport, problems: Problems, signal: AbortSignal): Promise<void> {
  const missing = new Set(settings.keys());
  while (missing.size > 0 && !signal.aborted) {
    for (const destination of [...missing]) {
      const key = missingKey(transport, destination);
      const exists = await transport.exists(destination, signal);
      if (signal.aborted) return;
      if (exists === true) {
        missing.delete(destination);
        problems.set(key, undefined);
      } else if (exists === false) problems.set(key, missingLine(settings, transport, destination));
      // Cannot tell (no permission to look, the service unreachable): the publisher's own
      // retries and logs cover it; keep asking only about what was found missing.
      else if (!problems.has(key)) missing.delete(destination);
    }
    if (missing.size > 0)
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, 10_000);
        signal.addEventListener("abort", () => (clearTimeout(t), resolve()), { once: true });
      });
  }
}
