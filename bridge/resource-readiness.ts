// Where each watched resource stands on its way to synced, for /readyz and
// crdfn_bridge_resource_state. Each resource goes on its own: one whose CRD is missing (or not
// served yet) waits for it alone while the others publish, and a bridge counts as synced once
// every resource is either synced or known not to be served.
import type { Logger } from "pino";
import type { GroupVersionResource } from "../core/resource-path.ts";
import type { BridgeMetrics } from "./metrics.ts";

export const RESOURCE_STATES = ["resolving", "not-served", "syncing", "synced"] as const;
export type ResourceState = (typeof RESOURCE_STATES)[number];

/** How a watched resource is named in /readyz, the metrics and the logs: "core/v1/secrets", "stable.example.com/v1/crontabs". */
export const resourceLabel = (r: GroupVersionResource): string => `${r.group === "" ? "core" : r.group}/${r.version}/${r.plural}`;

/**
 * One watched resource's state, kept in the engine's map of states. It settles (counts towards
 * the bridge's first sync) once, when it is synced or found not served.
 */
export class ResourceReadiness {
  readonly label: string;
  readonly #states: Map<string, ResourceState>;
  readonly #metrics: BridgeMetrics;
  readonly #onSettled: () => void;
  #settled = false;
  #synced = false;
  /** The reflectors (one per namespace scope) that last reported the resource not served. */
  readonly #unserved = new Set<object>();

  constructor(resource: GroupVersionResource, states: Map<string, ResourceState>, metrics: BridgeMetrics, onSettled: () => void) {
    this.label = resourceLabel(resource);
    this.#states = states;
    this.#metrics = metrics;
    this.#onSettled = onSettled;
    this.#set("resolving");
  }

  /** Discovery found it not served (yet): it waits alone, and the bridge does not wait for it. */
  notServedYet(): void {
    this.#set("not-served");
    this.#settle();
  }

  /** Discovery found it served: its reflectors start. */
  syncing(logger: Logger): void {
    if (this.#states.get(this.label) === "not-served") logger.info({ resource: this.label }, "resource served now; watching it");
    this.#set("syncing");
  }

  /**
   * A reflector's reports of the resource stopping being served (its CRD deleted) and being served
   * again: it is not-served while any of its reflectors says so.
   */
  servedBy(reflector: object): (served: boolean) => void {
    return (served) => {
      if (served) this.#unserved.delete(reflector);
      else this.#unserved.add(reflector);
      this.#set(this.#unserved.size > 0 ? "not-served" : this.#synced ? "synced" : "syncing");
    };
  }

  /** Its first list, and its owned and read kinds' first lists, are in, and what needed work is announced. */
  synced(): void {
    this.#synced = true;
    this.#set(this.#unserved.size > 0 ? "not-served" : "synced");
    this.#settle();
  }

  #set(state: ResourceState): void {
    if (this.#states.get(this.label) === state) return;
    this.#states.set(this.label, state);
    for (const s of RESOURCE_STATES) this.#metrics.resourceState.set({ resource: this.label, state: s }, s === state ? 1 : 0);
  }

  #settle(): void {
    if (this.#settled) return;
    this.#settled = true;
    this.#onSettled();
  }
}
