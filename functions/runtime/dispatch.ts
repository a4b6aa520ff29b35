// One queue carries the events of every resource and cluster the bridges watch; a function
// process routes each event to the runtime of its cluster, then of its resource.
import type { Logger } from "pino";
import { keyEventOf } from "./message.ts";
import type { Operator } from "../../core/operator.ts";
import type { Runtime } from "./runtime.ts";

export interface OperatorRuntime {
  operator: Operator<unknown>;
  runtime: Runtime;
}

/**
 * Routes each event to the runtime of the resource it names. A malformed event, or one for a
 * resource no operator here serves, is logged once (naming what this host serves, not one of its
 * operators) and dead-lettered.
 */
export function dispatchByResource(served: readonly OperatorRuntime[], logger?: Logger): Runtime {
  const [first] = served;
  if (!first) throw new Error("dispatchByResource needs at least one operator");
  if (served.length === 1) return first.runtime;
  const key = (group: string, plural: string) => (group === "" ? plural : `${plural}.${group}`);
  const byResource = new Map(served.map((s) => [key(s.operator.resource.group, s.operator.resource.plural), s.runtime]));
  return {
    async handle(message) {
      const parsed = keyEventOf(message);
      const firstReceive = (message.receiveCount ?? 1) <= 1;
      if (!parsed.ok) {
        if (firstReceive) logger?.error({ messageId: message.id, error: parsed.error }, "malformed key event; leaving it for the dead-letter queue");
        return { result: "dead-letter", detail: "malformed key event", apiCalls: 0 };
      }
      const runtime = byResource.get(key(parsed.event.group, parsed.event.plural));
      if (runtime) return runtime.handle(message);
      if (firstReceive) logger?.error({ messageId: message.id, resource: key(parsed.event.group, parsed.event.plural), served: [...byResource.keys()] }, "key event for a resource no operator here serves; leaving it for the dead-letter queue");
      return { result: "dead-letter", detail: "not a resource served here", apiCalls: 0 };
    },
  };
}

/**
 * One queue may carry the events of many clusters: each goes to the runtime of the cluster it
 * names, built on that cluster's first event and kept (with its client's keep-alive connection
 * and token cache). An event naming a cluster not served here is never reconciled against
 * another: it is logged once and dead-lettered.
 */
export function dispatchByCluster(clusters: readonly string[], build: (cluster: string) => Runtime | Promise<Runtime>, logger: Logger): Runtime {
  const [first] = clusters;
  if (first === undefined) throw new Error("dispatchByCluster needs at least one cluster");
  const served = new Set(clusters);
  const built = new Map<string, Promise<Runtime>>();
  const runtimeOf = (cluster: string): Promise<Runtime> => {
    let runtime = built.get(cluster);
    if (!runtime) {
      built.set(cluster, (runtime = Promise.resolve().then(() => build(cluster))));
      // A failed build (a CA file not there yet) is logged, and tried again on the cluster's next event.
      runtime.catch((error: unknown) => {
        built.delete(cluster);
        logger.error({ cluster, error: (error as Error).message }, `cannot set up the client of cluster "${cluster}": ${(error as Error).message}`);
      });
    }
    return runtime;
  };
  return {
    async handle(message) {
      const parsed = keyEventOf(message);
      // Malformed: any runtime logs it and dead-letters it without calling its API server.
      if (!parsed.ok) return (await runtimeOf(first)).handle(message);
      const { cluster, namespace, name } = parsed.event;
      if (served.has(cluster)) return (await runtimeOf(cluster)).handle(message);
      // Logged on the first receive only; the queue's later receives count it towards its DLQ.
      if ((message.receiveCount ?? 1) <= 1) logger.error({ messageId: message.id, cluster, object: `${namespace ?? ""}/${name}` }, `key event for cluster "${cluster}", which is not in the registry; leaving it for the dead-letter queue`);
      return { result: "dead-letter", detail: `cluster ${cluster} is not served here`, apiCalls: 0 };
    },
  };
}
